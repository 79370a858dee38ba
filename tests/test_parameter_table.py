"""Every option of every subcommand, fed absurd values (0, negative, nan, infinities, huge, tiny,
empty, not a number): each is accepted only inside its one ``Range`` and otherwise refused before
the command starts with one line, exit 2, naming the option. The options and their rules are read
from the parser itself, so a new option is covered without touching this table. Run with ``-s`` to
see the verdicts."""
from __future__ import annotations

import argparse
import math

import pytest

from dptop.capture.pcap import CaptureError
from dptop.cli import build_parser, main, prepare
from tests.conftest import DNS_CAPTURE

CAPTURE = str(DNS_CAPTURE)
ABSURD = ("0", "-1", "nan", "inf", "-inf", "1e308", "1e-300", "", "x")
BASE = {  # the least each subcommand needs besides the option under test
    "replay": [CAPTURE],
    "top": [CAPTURE],
    "capture": ["--iface", "lo"],
    "synth": ["--pcap", "/tmp/never-written.pcap"],
    "audit": ["--mechanism", "dpss"],
    "agent": ["--iface", "lo", "--scheduler", "tcp://127.0.0.1:1"],
    "collect": ["--scheduler", "tcp://127.0.0.1:1"],
}
EMPTY_ALLOWED = {("capture", "--bpf"), ("agent", "--bpf"), ("top", "--bpf")}
"""An empty BPF filter is no filter (as in tcpdump)."""


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options():
    for name, parser in _subcommands().items():
        for action in parser._actions:
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                yield name, action


OPTIONS = list(_options())


def verdict(argv, capsys) -> tuple[str, str]:
    """("accepted" | "refused", the message line): what dptop says before the command starts."""
    try:
        prepare(argv)
    except SystemExit as exc:
        err = capsys.readouterr().err
        assert exc.code == 2 and err.count("\n") == 1 and err.startswith("dptop: error:"), (argv, exc.code, err)
        return "refused", err.strip()
    except (ValueError, CaptureError) as exc:
        return "refused", str(exc)
    return "accepted", ""


def _inside(rule, text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    if not math.isfinite(value) or (rule.integer and not value.is_integer()):
        return False
    return value in rule


FOUND: list[str] = []


@pytest.mark.parametrize("command, action", OPTIONS, ids=[f"{c} {a.option_strings[-1]}" for c, a in OPTIONS])
def test_absurd_values_are_refused_in_one_line_naming_the_option(command, action, capsys, monkeypatch):
    if command == "agent":  # the agent's last check joins the scheduler: not a parameter (tests/test_cluster_tls.py)
        monkeypatch.setattr("dptop.cluster.connect.check_reachable", lambda *args, **kwargs: None)
    option = action.option_strings[-1]
    rule = getattr(action.type, "rule", None)
    rows = []
    for text in ABSURD:
        argv = [command, *BASE.get(command, []), option, text]
        if action.option_strings[-1] == "--iface" and "--iface" in BASE.get(command, []):
            argv = [command, *[a for a in BASE[command] if a not in ("--iface", "lo")], option, text]
        got, line = verdict(argv, capsys)
        rows.append(f"{command} {option} {text!r}: {got}" + (f" ({line})" if line else ""))
        if got == "refused":
            assert option in line or (rule and rule.name in line) or action.dest in line, (argv, line)
        if rule is not None and not _inside(rule, text):
            assert got == "refused", f"{argv}: accepted outside {rule.rule()}"
        if text == "" and (command, option) not in EMPTY_ALLOWED:
            assert got == "refused", f"{argv}: an empty value was accepted"
    FOUND.extend(rows)
    print("\n".join(rows))


def test_every_numeric_option_has_one_range():
    """No numeric option parses with a bare int/float: each goes through its ``Range``."""
    bare = [f"{c} {a.option_strings[-1]}" for c, a in OPTIONS if a.type in (int, float)]
    assert bare == []


SLOW_AT_THE_TOP = ("--k", "--k-tilde")
"""DP-MG with k~ = 2^24 counters allocates for half a minute: run with the slow checks."""


@pytest.mark.parametrize("option", [
    pytest.param(a.option_strings[-1], marks=[pytest.mark.slow] if a.option_strings[-1] in SLOW_AT_THE_TOP else [])
    for c, a in OPTIONS if c == "replay" and getattr(a.type, "rule", None) is not None])
def test_replay_runs_at_both_ends_of_every_range(option, tmp_path, capsys):
    """The documented bounds work end to end (the session starts and finishes, or a cross-parameter
    rule refuses them in one line before it starts)."""
    rule = next(a.type.rule for c, a in OPTIONS if c == "replay" and a.option_strings[-1] == option)
    for value in (rule.low, rule.high):
        if (rule.open_low and value == rule.low) or (rule.open_high and value == rule.high):
            continue
        text = str(int(value) if rule.integer else value)
        extra = ["--time-range", "1700000000:1700000000.01"] if option == "--epoch-seconds" and value == rule.low else []
        if option == "--speed" and value == rule.low:
            extra = ["--max-gap", "0.001"]  # the file spans 300 s of packet time: skip its gaps
        argv = ["replay", CAPTURE, "--algorithms", "exact,dpmg", option, text, *extra,
                "--json", str(tmp_path / "o.json")]
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc in (0, 2) and "Traceback" not in err and "internal error" not in err, (argv, rc, err)
        assert rc == 0 or err.count("dptop: error:") == 1, err
        print(f"replay {option} {text}: exit {rc} {err.strip().splitlines()[-1] if rc else ''}")


def test_a_range_names_the_parameter_the_value_and_the_rule():
    from dptop.engine.core.settings import Range

    k = Range("k", 1, 8, integer=True)
    assert k.check(3) == 3 and k.check(4.0) == 4 and k.parse("8") == 8
    for bad, message in ((0, r"k \(0\) must be in \[1, 8\]"), (2.5, r"k \(2.5\) must be an integer in \[1, 8\]"),
                         (True, r"k \(True\) must be an integer"), ("3", r"k \('3'\) must be an integer")):
        with pytest.raises(ValueError, match=message):
            k.check(bad)
    gamma = Range("gamma", 0.0, 1.0, open_low=True, open_high=True)
    for bad in (0.0, 1.0, float("nan"), float("inf"), -1e-300):
        with pytest.raises(ValueError, match=r"gamma \(.*\) must be in \(0.0, 1.0\)"):
            gamma.check(bad)
    with pytest.raises(ValueError, match=r"gamma \('x'\) must be a number in \(0.0, 1.0\)"):
        gamma.parse("x")
    assert gamma.check(1e-300) == 1e-300
