"""Hardening: template rendering is bounded in time and size, and shows only safe text."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from fsm_stage.fileio import read_text_input
from fsm_stage.prompts import PromptTemplateError, load_catalog, render

BIG = "<% set s = 'x' * 100000 %>"


@pytest.mark.parametrize(("template", "message"), [
    (BIG + "<% for a in s %><% for b in s %><% endfor %><% endfor %>", "loop steps"),
    ("<< 'a\nb'|indent(10**9) >>", "filter 'indent' would build"),
    ("<< 'x' * 10**9 >>", "repeating a str"),
    ("<% for i in range(10**9) %><% endfor %>", "'range' is undefined"),
    ("<< 'x'.center(10**9) >>", "str.center would build"),
    ("<< 'x'|center(10**9) >>", "filter 'center' would build"),
    (BIG + "<< s.replace('', s) >>", "str.replace would build"),
    (BIG + "<< s|replace('', s) >>", "filter 'replace' would build"),
    (BIG + "<< ([s] * 100000)|join >>", "filter 'join' would build"),
    (BIG + "<< [s] * 100000 >>", "output would build"),
    ("<< '%*s'|format(10**9, 'x') >>", "filter 'format' with a width"),
    ("<< '{:>1000000000}'.format(1) >>", "str.format with a width"),
    ("<< '%1000000000s' % 1 >>", "'%' formatting with a width"),
    ("<% macro f(s) %><< f(s ~ s) >><% endmacro %><< f('xxxxxxxx') >>", "concatenation would build"),
    ("<% macro f(n) %><% for i in [1,2,3,4,5,6,7,8,9,10] %><% if n < 30 %><< f(n + 1) >><% endif %>"
     "<% endfor %><% endmacro %><< f(1) >>", "loop steps or calls"),
    ("<< [1]|batch(10**9, 0)|list|length >>", "filter 'batch' would build"),
    ("<< ('a ' * 50000)|wordwrap(1, wrapstring='y' * 100000) >>", "filter 'wordwrap' would build"),
])
def test_runaway_templates_fail_fast_with_bounded_memory(template: str, message: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(PromptTemplateError, match="template") as err:
        render(template)
    text = str(err.value)
    # A machine too loaded to run the step budget out within the time budget stops on time instead.
    bounded = message in text or (message == "loop steps or calls" and "takes longer than" in text)
    assert bounded and "\n" not in text, text
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000  # never the gigabytes the unbounded operation would take


def test_the_error_names_the_template_line() -> None:
    with pytest.raises(PromptTemplateError, match="on line 2"):
        render("ok\n<< 'x' * 10**9 >>")


@pytest.mark.parametrize("template", ["<< stage_current.upper >>", "<< f >>", "<< obj >>", "<< [f] >>",
                                      "<< 'a' ~ stage_current.upper >>"])
def test_callables_and_address_only_objects_are_not_rendered(template: str) -> None:
    with pytest.raises(PromptTemplateError, match="cannot show") as err:
        render(template, stage_current="beta", f=len, obj=object())
    assert "0x" not in str(err.value)


def test_ordinary_templates_still_render() -> None:
    text = render("<< s >> << n + 1 >> << xs|join(', ') >> << xs|map('upper')|join('-') >> << 'a' ~ s >>"
                  "<% for x in xs %>[<< loop.index >><< x >>]<% endfor %> << '-'.join(xs|map('upper')) >>",
                  s="beta", n=1, xs=["a", "b"])
    assert text == "beta 2 a, b A-B abeta[1a][2b] A-B"


def test_control_characters_in_names_are_escaped_in_errors(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"\\x1b\[2J") as err:
        read_text_input(tmp_path / "no\x1b[2Jfile.yaml")
    assert "\x1b" not in str(err.value)
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "c.yaml").write_text('"bad\\a\\x1bkey": 1\n', encoding="utf-8")
    with pytest.raises(PromptTemplateError) as cat_err:
        load_catalog("c", base_dir=tmp_path)
    shown = str(cat_err.value)
    assert "\x1b" not in shown and "\x07" not in shown and "\\x1b" in shown


@pytest.mark.parametrize("template", [
    "<% macro sq(a, n) %><% if n > 0 %><< sq(a * a, n - 1) >><% else %><< a > 1 >><% endif %><% endmacro %>"
    "<< sq(3, 40) >>",
    "<% set n = 3 ** 2000 %><< (n * n) > 1 >>",
    "<< 2 ** 4097 > 1 >>",
    "<< 3 ** 2600 > 1 >>",
    "<< (7 ** 1000) ** 1000 > 1 >>",
])
def test_integer_multiplication_and_power_are_bounded(template: str) -> None:
    with pytest.raises(PromptTemplateError, match="integer of more than 4096 bits") as err:
        render(template)
    assert "\n" not in str(err.value)


def test_small_integer_arithmetic_still_works() -> None:
    assert render("<< 2 ** 4095 > 1 >> << 12 * 12 >> << 10 ** 100 * 10 ** 100 > 1 >> << 2 ** -2 >>") == (
        "True 144 True 0.25")


class _OwnStrOnly:
    def __str__(self) -> str:
        return "shown"


@pytest.mark.parametrize("template", [
    "<< '%r' % f >>", "<< '%s' % (f,) >>", "<< '%(a)r' % {'a': f} >>", "<< '{!r}'.format(f) >>",
    "<< '{}'.format(f) >>", "<< '{x!r}'.format_map({'x': f}) >>", "<< '%s'|format(f) >>",
    "<< f|string >>", "<< [f]|join >>", "<< ','.join([f]) >>", "<< '%r' % o >>", "<< [o] >>",
    "<< '{!r}'.format(s) >>", "<< [s]|string >>",
])
def test_a_memory_address_never_reaches_the_text(template: str) -> None:
    with pytest.raises(PromptTemplateError, match="cannot show") as err:
        render(template, f=len, o=object(), s=_OwnStrOnly())
    assert "0x" not in str(err.value)


def test_formatting_safe_values_still_works() -> None:
    assert render("<< '%r' % 'a' >> << '%s' % s >> << '{!r}'.format(1) >> << [1, 'b']|join(',') >>",
                  s=_OwnStrOnly()) == "'a' shown 1 1,b"
