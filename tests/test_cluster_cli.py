"""The cluster subcommands (dptop.cluster.cli): they plug into any argparse parser, bad input is one
clear line with exit code 2, and cluster-bench runs end to end on tiny files."""
import argparse
import json

import pytest

from dptop.cluster.cli import add_subcommands, main
from dptop.monitor.schemas import BY_COMMAND


def test_subcommands_plug_into_a_parser():
    parser = argparse.ArgumentParser(prog="dptop")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["agent", "--iface", "lo", "--scheduler", "tcp://127.0.0.1:8786", "--name", "tap"])
    assert (args.command, args.iface, args.name, args.func.__name__) == ("agent", "lo", "tap", "cmd_agent")
    args = parser.parse_args(["collect", "--scheduler", "tcp://127.0.0.1:8786", "--epoch-seconds", "2",
                              "--param", "t_max=1000"])
    assert args.epoch_seconds == 2.0 and args.param == [("t_max", 1000)] and args.algorithms == "exact,dpmg,misragries"


@pytest.mark.parametrize("argv,message", [
    (["collect", "--scheduler", "tcp://127.0.0.1:1", "--algorithms", "exact,dpss"],
     "not available in cluster mode: dpss"),
    (["agent", "--iface", "no-such-if0", "--scheduler", "tcp://127.0.0.1:1"], "no network interface 'no-such-if0'"),
    (["agent", "--iface", "lo", "--scheduler", "tcp://10.1.2.3:8786"], "plain tcp:// beyond loopback"),
    (["collect", "--scheduler", "tcp://sched.example:8786"], "plain tcp:// beyond loopback"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dptop: error:") and message in err and "\n" not in err


def test_cluster_bench_end_to_end(tmp_path, capsys):
    from dptop.cli import main as dptop_main

    out = tmp_path / "bench.json"
    assert dptop_main(["cluster-bench", "--quick", "--files", "2", "--packets", "4096", "--workers", "1",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(report, BY_COMMAND["cluster-bench"])
    runs = {r["run"]: r for r in report["rows"]}
    assert set(runs) == {"in-process", "local:1", "1 s time epochs"}
    assert runs["local:1"]["speedup_vs_1_worker"] == 1.0 and runs["in-process"]["speedup_vs_one_process"] == 1.0
    assert runs["1 s time epochs"]["bytes_per_epoch"] > 0
    assert "load average" in report["notes"] and "== cluster ==" in capsys.readouterr().out
