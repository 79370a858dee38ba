"""Option parsing for every ``dptop`` subcommand: each numeric option is checked against its one
``Range`` (defined where the value is used) while the command line is parsed, so a bad value is
one line naming the option and its range, exit 2, before anything runs or any output is touched.
"""
from __future__ import annotations

import argparse
import sys

from dptop.engine.core.settings import Range


class Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error (``dptop: error: argument --k: ...``, exit 2);
    ``-h`` still shows the full usage. Subcommand parsers are of the same class."""

    def error(self, message: str):
        self.exit(2, f"dptop: error: {message} (see {self.prog} -h)\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse, but an unknown option is sent to the help of the subcommand it was given
        to (``dptop replay -h``), not to ``dptop -h``."""
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(namespace, "command", None)
            prog = f"{self.prog} {command}" if command else self.prog
            self.exit(2, f"dptop: error: unrecognized arguments: {' '.join(extras)}{_after(args, extras[0])} "
                         f"(see {prog} -h)\n")
        return namespace


def _after(args, extra: str) -> str:
    """`` after --product``: the option an unrecognized value followed (``--product -inf``: argparse
    takes ``-inf`` for an option, so ``--product`` keeps its default and the value is left over)."""
    args = sys.argv[1:] if args is None else list(args)
    at = args.index(extra) if extra in args else 0
    before = args[at - 1] if at > 0 else ""
    return f" after {before}" if before.startswith("-") else ""


class InstalledVersion(argparse._VersionAction):
    """``--version``: ``dptop VERSION``, read from the installed metadata only when asked (loading
    importlib.metadata is a few percent of a replay's start-up)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from dptop import __version__

        self.version = f"dptop {__version__}"
        super().__call__(parser, namespace, values, option_string)


def document_defaults(parser: argparse.ArgumentParser) -> None:
    """Name the default in every option's help that does not say it yet, in every subcommand:
    ``(default: 16)``, ``(default: off)`` for a switch; an option without help is left to its
    test (tests/test_cli_help.py)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                document_defaults(sub)
            continue
        text = action.help
        if not text or text == argparse.SUPPRESS or "default" in text.lower() or action.required \
                or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        if isinstance(action, argparse._StoreTrueAction):
            value = "off"
        elif action.default is None or action.default == []:
            continue  # what "not given" means needs words: the help says it itself
        else:
            value = action.default
        action.help = f"{text} (default: {value})"


def ranged(rule: Range):
    """argparse ``type=`` for a number in ``rule``."""
    def parse(text: str):
        try:
            return rule.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__, parse.rule = rule.name, rule
    return parse


def ranged_list(rule: Range):
    """argparse ``type=`` for a comma-separated, non-empty list of numbers in ``rule``."""
    def parse(text: str):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"{rule.name} ({text!r}) must list at least one value in {rule.rule()}")
        try:
            return [rule.parse(t) for t in items]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__, parse.rule = rule.name, rule
    return parse


def json_target(text: str) -> str:
    """argparse ``type=`` of every ``--json OUT|-``: a file name, or - for stdout; never empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("--json must name a file, or - for stdout")
    return text


def names_arg(what: str, known):
    """argparse ``type=`` for a comma-separated, non-empty list of names out of ``known``."""
    def parse(text: str):
        names = [t.strip() for t in text.split(",") if t.strip()]
        unknown = [n for n in names if n not in known]
        if not names or unknown:
            raise argparse.ArgumentTypeError(f"{what} ({text!r}) must name one or more of {', '.join(known)}")
        return ",".join(names)
    parse.__name__ = what
    return parse


def nonempty(what: str):
    """argparse ``type=`` for a string option that must not be empty (a path, a name)."""
    def parse(text: str):
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{what} must not be empty")
        return text
    parse.__name__ = what
    return parse


def check_live(iface: str, bpf: str | None) -> None:
    """Open the capture socket once and close it: an unknown interface or a filter that does not
    compile is ``ValueError`` (exit 2), a missing permission ``CapturePermissionError`` (exit 1)."""
    from dptop.capture.live import CapturePermissionError, list_interfaces, probe
    from dptop.capture.pcap import CaptureError

    if iface not in list_interfaces():
        raise ValueError(f"--iface: no network interface {iface!r}; interfaces: {', '.join(list_interfaces())}")
    try:
        probe(iface, bpf)
    except CapturePermissionError:
        raise
    except CaptureError as exc:
        raise ValueError(f"--bpf: {exc}" if bpf else str(exc)) from None
