"""One controller lifecycle (``fsm_stage.runtime.controller``): ``ControllerLifecycle`` and
``Registration`` attach all or nothing, close once, and refuse a closed or attached controller;
plan mode and the stage switch both attach and close through it."""

from __future__ import annotations

import importlib
from typing import Any, cast

import pytest

from fsm_stage.plan_mode import PlanModeController
from fsm_stage.runtime.assembly import ContextEntry, SystemSection
from fsm_stage.runtime.commands import CommandReply, CommandSpec
from fsm_stage.runtime.controller import ControllerLifecycle, Registration
from fsm_stage.runtime.runtime import ControllerClosedError, Runtime
from fsm_stage.runtime.tools import ToolOutput, ToolSpec
from fsm_stage.stage_switch import StageController

from .harness import make_config


class _Tool:
    spec = ToolSpec(name="probe", description="probe", parameters={"type": "object"})

    async def execute(self, args: object, agent: object, signal: object = None) -> ToolOutput:
        return ToolOutput({}, "ok")


class _Command:
    spec = CommandSpec("probe", "probe")

    def handle(self, agent: object, raw_input: str, images: object) -> CommandReply:
        return CommandReply.success("ok")


def _contribute_everything(reg: Registration) -> None:
    reg.section(SystemSection("probe:section", 10, lambda agent: "s"))
    reg.context(ContextEntry("probe:context", 10, lambda agent: "c"))
    reg.tool(_Tool())
    reg.command(_Command())
    reg.pre_step(lambda agent, messages, aborted: messages)
    reg.service("probe", object())
    reg.invariant(lambda event: None)


def _empty(runtime: Runtime) -> bool:
    return (not runtime.section_names and not runtime.context_names and not runtime.tools
            and runtime.service("probe") is None and runtime.commands is not None
            and runtime.commands.get("probe") is None)


def test_attach_registers_every_contribution_and_close_undoes_them_once() -> None:
    runtime = Runtime()
    life = ControllerLifecycle("probe controller")
    life.attach(runtime, _contribute_everything)
    assert life.attached and life.runtime is runtime
    assert runtime.section_names == ("probe:section",) and runtime.context_names == ("probe:context",)
    assert "probe" in runtime.tools and runtime.service("probe") is not None
    assert life.close() is True
    assert _empty(runtime) and life.closed and not life.attached
    assert life.close() is False  # idempotent: the second close does nothing


def test_attach_is_all_or_nothing() -> None:
    runtime = Runtime()
    runtime.add_service("probe", "taken")

    def clash(reg: Registration) -> None:
        reg.section(SystemSection("probe:section", 10, lambda agent: "s"))
        reg.tool(_Tool())
        reg.service("probe", object())  # ValueError: the name is taken

    life = ControllerLifecycle("probe controller")
    with pytest.raises(ValueError, match="already registered"):
        life.attach(runtime, clash)
    assert not runtime.section_names and not runtime.tools and not life.attached
    life.attach(Runtime(), _contribute_everything)  # a failed attach leaves it attachable


def test_attached_or_closed_lifecycle_refuses_attach() -> None:
    life = ControllerLifecycle("probe controller")
    life.attach(Runtime(), _contribute_everything)
    with pytest.raises(RuntimeError, match="probe controller is already attached to a runtime"):
        life.attach(Runtime(), _contribute_everything)
    life.close()
    with pytest.raises(ControllerClosedError, match="probe controller is closed"):
        life.attach(Runtime(), _contribute_everything)
    with pytest.raises(ControllerClosedError):
        life.ensure_open()


def test_optional_registries_are_skipped() -> None:
    runtime = Runtime(commands=False, projections=False)
    seen: list[bool] = []

    def optional(reg: Registration) -> None:
        seen.append(reg.command(_Command()))
        seen.append(reg.projection("probe", cast(Any, object())))

    ControllerLifecycle("probe controller").attach(runtime, optional)
    assert seen == [False, False]


def test_close_before_attach_just_closes() -> None:
    life = ControllerLifecycle("probe controller")
    assert life.close() is True and life.closed and life.runtime is None


def test_both_controllers_share_the_lifecycle() -> None:
    runtime = Runtime()
    plan = PlanModeController({"section": "plan"})
    stage = StageController(make_config())
    for controller in (plan, stage):
        assert isinstance(controller.lifecycle, ControllerLifecycle)
        runtime.attach(controller)
        assert controller.lifecycle.attached and controller.lifecycle.runtime is runtime
        with pytest.raises(RuntimeError, match="already attached to a runtime"):
            controller.attach(runtime)
    plan.close()
    stage.close()
    assert not runtime.tools and not runtime.section_names and not runtime.context_names
    for controller in (plan, stage):
        assert controller.closed
        controller.close()  # idempotent
        with pytest.raises(ControllerClosedError):
            controller.attach(Runtime())


def test_stage_switch_package_reexports_every_public_name() -> None:
    package = importlib.import_module("fsm_stage.stage_switch")
    for name in package.__all__:
        assert getattr(package, name) is not None, name
