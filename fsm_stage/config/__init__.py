"""Stage-graph configuration: the data model, the YAML loader and its validation rules.

``load_config(path)`` / ``load_config_text(text)`` read a native-form or plugin-list file
into a ``ConfigFile`` (``graph``: ``GraphConfig``, ``plan_mode``: ``PlanModeConfig``,
``warnings``) or raise ``ConfigError`` with one ``PATH:LINE:COLUMN: KEY: message``
line per problem; ``normalised`` is the plain dict the graph fingerprint hashes.

``model``       the frozen attrs classes and their ``FieldRule`` metadata.
``load``        the loader (native form, fast path, warnings, ``strict``).
``plugin``      the DeepSeek Harness plugin-list form.
``rules``       value, cross-reference and template rules; warnings.
``vocabulary``  the stage-graph flavour of ``fsm_stage._yaml`` (``strict_converter``,
                ``positioned_problems``, for other YAML inputs such as scenario files).
``schema``      the JSON Schema derived from the model (import it from its module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm_stage._lazy import lazy_exports

if TYPE_CHECKING:  # the static view of the lazy names below
    from fsm_stage._yaml import NativePath, Problem, ProblemReport, describe_value
    from fsm_stage.config.load import ConfigError, load_config, load_config_text
    from fsm_stage.config.model import (
        CONFIG_CLASSES,
        EXTENSION_PREFIX,
        GUARD_NAME_PATTERN,
        MAX_NAME_LENGTH,
        PLAN_MODE_KEY,
        SCALAR_SHORTHAND,
        STAGE_NAME_PATTERN,
        TEMPLATE_VARIABLES,
        ConfigFile,
        EdgeConfig,
        FieldRule,
        GraphConfig,
        Language,
        PlanModeConfig,
        StageConfig,
        field_rule,
        normalised,
        yaml_key,
    )
    from fsm_stage.config.plugin import (
        PLAN_MODE_PLUGIN_ID,
        PLUGIN_PACKAGES,
        STAGE_SWITCH_PLUGIN_ID,
        plugin_name_pattern,
    )
    from fsm_stage.config.vocabulary import positioned_problems, strict_converter

#: exported name -> the module that defines it (under this package, or absolute); loaded on first
#: use (PEP 562), so importing one part (the model, say) loads neither the loader nor jinja2.
_EXPORTS: dict[str, str] = {
    "NativePath": "fsm_stage._yaml",
    "Problem": "fsm_stage._yaml",
    "ProblemReport": "fsm_stage._yaml",
    "describe_value": "fsm_stage._yaml",
    "ConfigError": "load",
    "load_config": "load",
    "load_config_text": "load",
    "CONFIG_CLASSES": "model",
    "EXTENSION_PREFIX": "model",
    "GUARD_NAME_PATTERN": "model",
    "MAX_NAME_LENGTH": "model",
    "PLAN_MODE_KEY": "model",
    "SCALAR_SHORTHAND": "model",
    "STAGE_NAME_PATTERN": "model",
    "TEMPLATE_VARIABLES": "model",
    "ConfigFile": "model",
    "EdgeConfig": "model",
    "FieldRule": "model",
    "GraphConfig": "model",
    "Language": "model",
    "PlanModeConfig": "model",
    "StageConfig": "model",
    "field_rule": "model",
    "normalised": "model",
    "yaml_key": "model",
    "PLAN_MODE_PLUGIN_ID": "plugin",
    "PLUGIN_PACKAGES": "plugin",
    "STAGE_SWITCH_PLUGIN_ID": "plugin",
    "plugin_name_pattern": "plugin",
    "positioned_problems": "vocabulary",
    "strict_converter": "vocabulary",
}


__all__ = [
    "CONFIG_CLASSES",
    "EXTENSION_PREFIX",
    "GUARD_NAME_PATTERN",
    "MAX_NAME_LENGTH",
    "PLAN_MODE_KEY",
    "PLAN_MODE_PLUGIN_ID",
    "PLUGIN_PACKAGES",
    "SCALAR_SHORTHAND",
    "STAGE_NAME_PATTERN",
    "STAGE_SWITCH_PLUGIN_ID",
    "TEMPLATE_VARIABLES",
    "ConfigError",
    "ConfigFile",
    "EdgeConfig",
    "FieldRule",
    "GraphConfig",
    "Language",
    "NativePath",
    "PlanModeConfig",
    "Problem",
    "ProblemReport",
    "StageConfig",
    "describe_value",
    "field_rule",
    "load_config",
    "load_config_text",
    "normalised",
    "plugin_name_pattern",
    "positioned_problems",
    "strict_converter",
    "yaml_key",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
