"""The `ringroute` parser as a whole: global options anywhere, --version, one-line errors, help that shows every
default, one meaning per option name, hidden aliases for renamed options, and a --help that stays light."""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from webhook.cli import plan as plan_command
from webhook.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]

# Options whose absence simply means "not used": there is no default to show.
OPTIONAL_INPUTS = {
    "--pods",  # one of --pods and --job
    "--job",
    "--nodes",
    "--hypernodes",
    "--tor-configmap",
    "--topology",
    "--job-name",
    "--plot",
    "--nodes-out",
}


def parsers(parser: argparse.ArgumentParser | None = None) -> Iterator[argparse.ArgumentParser]:
    """Every parser of the command line, the top-level one first."""
    parser = parser or build_parser()
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from parsers(child)


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            yield action


def flat_help(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_help().split())


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_version_comes_from_the_installed_package_before_or_after_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["--version"], ["plan", "--version"], ["certs", "generate", "--version"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 0
        assert capsys.readouterr().out == f"ringroute {version('ringroute')}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["--log-level", "debug", "topology", "generate", "--leaves", "2", "--servers-per-leaf", "2", "--out", "t"],
        ["topology", "generate", "--log-level", "debug", "--leaves", "2", "--servers-per-leaf", "2", "--out", "t"],
        ["topology", "generate", "--leaves", "2", "--servers-per-leaf", "2", "--out", "t", "--log-level", "DEBUG"],
        ["--log-level", "ERROR", "topology", "generate", "--leaves", "2", "--servers-per-leaf", "2", "--out", "t",
         "--log-level", "Debug"],
    ],
)  # fmt: skip
def test_log_level_is_accepted_before_or_after_the_command_and_the_later_one_wins(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).log_level == "DEBUG"


def test_log_level_defaults_to_info_in_every_position() -> None:
    assert (
        build_parser()
        .parse_args(["certs", "generate", "--service", "s", "--namespace", "n", "--out-dir", "d"])
        .log_level
        == "INFO"
    )


@pytest.mark.parametrize("argv", [["--log-level", "LOUD", "plan"], ["plan", "--log-level", "LOUD"]])
def test_an_unknown_log_level_is_one_line_with_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    line = one_error_line(capsys)
    assert "argument --log-level: 'LOUD' is not a log level; choose one of DEBUG, INFO, WARNING, ERROR" in line


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["plan", "--pods", "p.yaml"], "ringroute plan: error: the following arguments are required: --out-dir"),
        (["plna"], "ringroute: error: argument COMMAND: invalid choice: 'plna'"),
        (["simulate", "--pods", "p", "--seeds", "many"], "argument --seeds: invalid int value: 'many'"),
        (["certs", "generate", "--service", "s"], "required: --namespace, --out-dir; see ringroute certs generate"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    line = one_error_line(capsys)
    assert expected in line
    assert line.endswith("--help")


def test_an_unforeseen_failure_is_one_line_with_exit_2_and_the_traceback_at_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_args: argparse.Namespace) -> int:
        raise KeyError("leaf-9")

    monkeypatch.setattr(plan_command, "run_topology_generate", broken)
    caplog.set_level(logging.DEBUG, logger="ringroute")  # pytest's handlers keep basicConfig from setting it
    argv = ["topology", "generate", "--leaves", "2", "--servers-per-leaf", "2", "--out", "t.yaml"]
    assert main([*argv, "--log-level", "DEBUG"]) == 2
    assert one_error_line(capsys) == (
        "ringroute topology generate: error: unexpected KeyError: 'leaf-9'; "
        "rerun with --log-level DEBUG for the traceback"
    )
    assert any(record.exc_info for record in caplog.records)


def test_every_option_has_help_and_every_default_is_shown() -> None:
    for parser in parsers():
        shown = flat_help(parser)
        for action in options(parser):
            name = action.option_strings[0]
            assert action.help, f"{parser.prog} {name}: no help"
            assert action.help.strip(), f"{parser.prog} {name}: no help"
            default = action.default
            if action.required or isinstance(action, argparse._VersionAction) or default is argparse.SUPPRESS:
                continue
            if default is None:
                # No built-in value: either the option is simply optional, or help says where the value comes from.
                assert name in OPTIONAL_INPUTS or "(default" in action.help, f"{parser.prog} {name}: no default"
            elif default is not False and default != []:
                assert f"(default: {default}" in shown or ("(default" in action.help and str(default) in action.help), (
                    f"{parser.prog} {name}: default {default!r} not shown"
                )


def test_defaults_that_come_from_settings_show_the_built_in_values() -> None:
    shown = flat_help(next(p for p in parsers() if p.prog == "ringroute plan"))
    for text in (
        "--pattern {ring,halving-doubling,mixed} collective pattern to optimise for (default: ring)",
        "(default: ecmp)",
        "--qps Q queue pairs per cross-leaf connection, each with its own UDP source port; above 1 they are written "
        "to MultiQpSrcPort.cfg (default: 1)",
        "--seed S planner seed (default: 0)",
        "--time-limit SECONDS planner time budget in seconds (default: 2)",
        "--nics N NICs per server (default: 8)",
        "--link-gbps G link rate in Gbit/s (default: 200)",
    ):
        assert text in shown
    serve = flat_help(next(p for p in parsers() if p.prog == "ringroute serve"))
    assert "--listen ADDR:PORT admission address (default: 0.0.0.0:9443)" in serve
    assert "--workers N processes sharing the admission port (default: 1)" in serve
    assert "(default: settings extender.listen, 0.0.0.0:8888)" in serve


def test_an_option_name_means_one_thing_in_every_command() -> None:
    kinds: dict[str, set[str]] = {}
    for parser in parsers():
        for action in options(parser):
            name = action.option_strings[0]
            kinds.setdefault(name, set()).add(str(action.metavar))
            if name.endswith("-dir"):
                assert action.metavar == "DIR", f"{parser.prog} {name}"
            if action.metavar == "DIR":
                assert name.endswith("-dir"), f"{parser.prog} {name}: a directory is --...-dir"
            if action.metavar == "FILE" and name.startswith("--out"):
                assert name.endswith("out"), f"{parser.prog} {name}: a file to write is --out or --<what>-out"
    assert kinds["--out"] == {"FILE"}
    assert kinds["--out-dir"] == {"DIR"}


def test_certs_generate_out_is_a_hidden_alias_of_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    certs = next(p for p in parsers() if p.prog == "ringroute certs generate")
    assert "--out-dir DIR" in certs.format_help()
    assert "--out " not in certs.format_help()
    assert "--out," not in certs.format_help()
    old, new = tmp_path / "old", tmp_path / "new"
    for flag, out in (("--out", old), ("--out-dir", new)):
        assert main(["certs", "generate", "--service", "s", "--namespace", "n", flag, str(out)]) == 0
        assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
        assert capsys.readouterr().err == ""  # nothing extra for the old spelling


def test_simulate_scheduling_help_names_the_schedulers_and_their_old_names() -> None:
    shown = flat_help(next(p for p in parsers() if p.prog == "ringroute simulate-scheduling"))
    assert "--scheduler {volcano,ringroute,both}" in shown
    assert "volcano: Volcano's own plugins alone; ringroute: Volcano with the ringroute extender" in shown
    assert "(default: both)" in shown
    assert "The older names default (for volcano) and extender (for ringroute) still work." in shown
    for old in ("default", "extender"):
        assert build_parser().parse_args(["simulate-scheduling", "--scheduler", old]).scheduler == old


def test_help_loads_neither_numpy_nor_scipy() -> None:
    code = (
        "import contextlib, io, json, sys\n"
        "from webhook.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['plan', '--help'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(result.stdout) == []
