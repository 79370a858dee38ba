"""Every option of every subcommand is documented in plain words with its default, and ``dptop
list`` speaks the same plain words (no paper tags, code names or spec sections)."""
import argparse
import re

import pytest

from dptop.cli import build_parser, main
from dptop.monitor import catalogue

JARGON = re.compile(r"\[\d{3} |\bAlg \d|extra\[|Settings\.|spec §|§\d|``|docstring")


def subcommands():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices.items())


def options():
    for name, parser in subcommands():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            yield pytest.param(name, action, id=f"{name} {'/'.join(action.option_strings) or action.dest}")


@pytest.mark.parametrize("command, action", list(options()))
def test_every_option_has_help_with_its_default(command, action):
    text = " ".join((action.help or "").split())
    assert text and text != argparse.SUPPRESS, f"dptop {command}: {action.option_strings or action.dest} has no help"
    assert not JARGON.search(text), text
    if action.required or (not action.option_strings and action.nargs not in ("?", "*")):
        return  # a required option or argument has no default
    assert "default" in text.lower(), f"dptop {command} {action.option_strings}: the help names no default: {text}"


def test_every_subcommand_has_a_description():
    for name, parser in subcommands():
        assert parser.description or parser.format_help(), name


def test_list_speaks_plain_words(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in catalogue.names():
        assert re.search(rf"^{re.escape(name)}\s", out, re.M), name
        assert name in catalogue.DESCRIPTIONS, f"{name} has no plain description in dptop.monitor.catalogue"
    assert not JARGON.search(out), JARGON.search(out)
