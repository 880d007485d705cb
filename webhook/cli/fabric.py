"""`ringroute fabric calibrate` and `ringroute fabric show`: the hash model of the fabric's ECMP switches.

`calibrate --print-probes` lists, per switch, the 5-tuples to ask the switch about (JSON lines with
`"next_hop": null`); the admin fills in each answer from the switch's CLI (docs/fabric-calibration.md), and
`calibrate --samples FILE --out FILE` turns the answers into a hash model file, which `ringroute plan
--hash-model FILE` and the settings read. Every failure is one line on stderr with exit status 2, and nothing is
written unless every switch with samples was calibrated (or `--allow-unknown` says to write the others).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from webhook.cli import fabric_load
from webhook.cli.errors import CommandError, one_line, printable
from webhook.cli.fabric_inputs import add_topology_arguments, read_topology
from webhook.cli.inputs import MAX_INPUT_CHARS, read_from, read_settings, read_text, source_ports
from webhook.cli.outputs import replace_file, staged_file

if TYPE_CHECKING:
    from planner import AddressPool as Pool
    from planner import CalibrationResult, FabricSwitch, HashModel, SwitchHash, SwitchProbes, Topology
    from webhook.common.settings import Settings

log = logging.getLogger("ringroute.fabric")

SAMPLES_HINT = "pass JSON lines {switch, src, dst, sport, dport, next_hop} (docs/fabric-calibration.md)"
MODEL_HINT = "pass a ringroute hash model file (docs/simulator.md, Hash model)"


def register(subparsers: Any) -> None:
    """Add `fabric calibrate` and `fabric show`."""
    fabric = subparsers.add_parser(
        "fabric",
        help="the hash model of the fabric's ECMP switches",
        description="Calibrate and show the hash model that steering uses to pin queue pairs to spines.",
    )
    commands = fabric.add_subparsers(dest="fabric_command", metavar="COMMAND")
    calibrate = commands.add_parser(
        "calibrate",
        help="build a hash model from switches' answers, or list the tuples to ask them about",
        description="With --samples, learn or fit each switch's ECMP hash from its answers and write the hash "
        "model to --out. With --print-probes, print the 5-tuples to ask each switch about instead.",
    )
    calibrate.add_argument(
        "--samples",
        type=Path,
        metavar="FILE",
        help="the switches' answers: JSON lines, docs/fabric-calibration.md (default: none; required unless "
        "--print-probes)",
    )
    calibrate.add_argument(
        "--hash-model",
        type=Path,
        metavar="FILE",
        help="declared functions to fit per tier or switch; its other entries are kept (default: learn every "
        "switch from its samples)",
    )
    calibrate.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="the hash model to write, JSON if it ends in .json, else YAML; with --print-probes, the probes "
        "(default: none; the probes go to stdout)",
    )
    calibrate.add_argument(
        "--allow-unknown",
        action="store_true",
        help="write the model even when some switches could not be calibrated; they are listed as unknown",
    )
    calibrate.add_argument("--json", action="store_true", help="print the per-switch report as JSON")
    calibrate.add_argument(
        "--time-limit", type=float, metavar="SECONDS", help="stop calibrating after this long (default: no limit)"
    )
    probes = calibrate.add_argument_group("probes (--print-probes)")
    probes.add_argument(
        "--print-probes",
        action="store_true",
        help="print the tuples to ask each switch about, as samples lines with next_hop null",
    )
    probes.add_argument(
        "--switch",
        action="append",
        default=[],
        metavar="NAME",
        help="only this switch (repeatable); without a topology, the switches to probe",
    )
    probes.add_argument(
        "--pods",
        type=Path,
        metavar="FILE",
        help="the job's Pods: probe with the RoCE addresses of its NICs, each switch with those under it",
    )
    probes.add_argument(
        "--addresses",
        action="append",
        default=[],
        metavar="CIDR",
        help="probe sources and destinations from these networks (repeatable) instead of a job's NICs",
    )
    probes.add_argument(
        "--source-ports",
        metavar="FIRST-LAST",
        help="the source ports steering picks from (default: the settings' planning.sourcePorts, 49152-65535)",
    )
    probes.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the probes (default: 0)")
    probes.add_argument(
        "--count", type=int, metavar="N", help="probes per switch (default: as many as learning needs, with a margin)"
    )
    add_topology_arguments(calibrate.add_argument_group("topology (switch names and next-hop counts)"))
    calibrate.set_defaults(handler=run_calibrate)

    show = commands.add_parser(
        "show", help="print a hash model file", description="Print what a hash model file says, switch by switch."
    )
    show.add_argument("--hash-model", type=Path, required=True, metavar="FILE", help="the hash model file")
    show.set_defaults(handler=run_show)
    fabric_load.register(commands)
    fabric.set_defaults(handler=lambda _args: _usage(fabric))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


# -- inputs ---------------------------------------------------------------------------------------------------------


def _switches(topology: Topology | None) -> dict[str, FabricSwitch] | None:
    if topology is None:
        return None
    from planner import fabric_switches
    from webhook.cli.plan_case import guarded

    return guarded("topology", None, lambda: fabric_switches(topology))


def _sample_lines(stream: TextIO, where: str) -> Iterator[str]:
    """The file's lines, each read with a bound (the samples reader refuses a longer one), and the file with one."""
    from planner import MAX_SAMPLE_LINE_CHARS

    total = 0
    while True:
        try:
            line = stream.readline(MAX_SAMPLE_LINE_CHARS + 2)
        except UnicodeDecodeError:
            raise CommandError(f"{where}: not UTF-8 text; {SAMPLES_HINT}") from None
        except OSError as exc:
            raise CommandError(f"{where}: cannot read: {exc.strerror or exc}") from None
        if not line:
            return
        total += len(line)
        if total > MAX_INPUT_CHARS:
            raise CommandError(f"{where}: larger than {MAX_INPUT_CHARS >> 20} MiB; calibrate the switches in parts")
        yield line


def _samples(path: Path, switches: Mapping[str, FabricSwitch] | None) -> tuple[Any, ...]:
    from planner import read_hash_samples

    where = f"--samples {path}"
    try:
        with path.open(encoding="utf-8") as stream:
            return read_from(
                where, lambda: read_hash_samples(_sample_lines(stream, where), switches=switches), SAMPLES_HINT
            )
    except OSError as exc:
        raise CommandError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CommandError(f"{where}: not UTF-8 text; {SAMPLES_HINT}") from None


def _hash_model(path: Path) -> HashModel:
    from planner import load_hash_model

    text = read_text(path, "--hash-model")
    return read_from(f"--hash-model {path}", lambda: load_hash_model(text), MODEL_HINT)


# -- calibrate -----------------------------------------------------------------------------------------------------


def run_calibrate(args: argparse.Namespace) -> int:
    """`ringroute fabric calibrate`: write the hash model learned from --samples, or print probes."""
    if args.print_probes:
        return _print_probes(args)
    for flag in ("pods", "addresses", "count"):
        if getattr(args, flag):
            raise CommandError(f"--{flag}: only applies with --print-probes")
    if args.samples is None:
        raise CommandError("--samples: missing; give the switches' answers (or --print-probes to list the questions)")
    if args.out is None:
        raise CommandError("--out: missing; give the hash model file to write")
    if args.out.exists() and args.out.is_dir():
        raise CommandError(f"--out {args.out}: is a directory; give a file")
    if args.time_limit is not None and not 0 < args.time_limit < float("inf"):
        raise CommandError(f"--time-limit {args.time_limit}: must be a positive number of seconds")
    settings = read_settings(args.settings, "--settings")
    topology = read_topology(args, settings)
    switches = _switches(topology)
    declared = _hash_model(args.hash_model) if args.hash_model is not None else None
    samples = _samples(args.samples, switches)
    if args.switch:
        unknown = sorted(set(args.switch) - {sample.switch for sample in samples})
        if unknown:
            raise CommandError(f"--switch {unknown[0]}: no sample of it in --samples {args.samples}")
        samples = tuple(sample for sample in samples if sample.switch in set(args.switch))
    from planner import calibrate_hash_model, dump_hash_model
    from webhook.cli.plan_case import guarded

    result = guarded(
        f"--samples {args.samples}",
        None,
        lambda: calibrate_hash_model(samples, declared, switches=switches, time_limit=args.time_limit),
    )
    _report(result, as_json=args.json)
    failed = [c for c in result.switches.values() if not c.success]
    if failed and not args.allow_unknown:
        first = failed[0]
        others = f"; {len(failed) - 1} more switches too" if len(failed) > 1 else ""
        raise CommandError(
            f"--samples {args.samples}: {one_line(first.message, limit=None)}{others}; nothing written "
            "(--allow-unknown writes the others and lists these as unknown)"
        )
    text = dump_hash_model(result.model, as_json=args.out.suffix.lower() == ".json")
    replace_file(args.out, text, flag="--out")
    log.info("wrote %s: %d switches calibrated, %d unknown", args.out, len(result.switches) - len(failed), len(failed))
    return 0


def _report(result: CalibrationResult, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    rows = [("switch", "status", "source", "samples", "needed", "span", "hold-out")]
    for calibration in result.switches.values():
        holdout = calibration.holdout
        rows.append(
            (
                calibration.switch,
                calibration.status,
                calibration.hash.source if calibration.hash is not None else "-",
                str(calibration.samples_used),
                str(calibration.samples_needed) if calibration.samples_needed is not None else "-",
                f"{calibration.span_bits} bits",
                f"{holdout.correct}/{holdout.tested}" if holdout is not None else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(printable("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()))
    for calibration in result.switches.values():
        print(printable(calibration.message))
    print(result.message)


# -- probes --------------------------------------------------------------------------------------------------------


def _probe_pools(
    args: argparse.Namespace, settings: Settings, topology: Topology | None, switches: Mapping[str, FabricSwitch] | None
) -> dict[str, tuple[Pool, Pool]]:
    from planner import InputError, address_pool, switch_pools
    from webhook.cli.plan_case import guarded

    names: list[str] = list(dict.fromkeys(args.switch))
    if switches is not None:
        missing = [name for name in names if name not in switches]
        if missing:
            raise CommandError(f"--switch {missing[0]}: not a switch of the topology ({len(switches)} switches)")
    elif not names:
        raise CommandError("switches: give --topology FILE or --nodes FILE (every switch), or --switch NAME")
    if args.pods is not None and args.addresses:
        raise CommandError("--pods and --addresses: give one source of addresses")
    if args.addresses:
        try:
            pool = address_pool(args.addresses)
        except InputError as exc:  # it names --addresses and the value itself
            raise CommandError(str(exc)) from None
        return dict.fromkeys(names or list(switches or {}), (pool, pool))
    if args.pods is None:
        raise CommandError(
            "addresses: give --pods FILE (the job's NICs, under each switch) or --addresses CIDR (a network to probe)"
        )
    if topology is None:
        raise CommandError(
            "--pods: also give --topology FILE or --nodes FILE, to know which NICs are under which switch"
        )
    placement = _placement(args.pods, settings)
    pools = guarded("--pods", args.pods, lambda: switch_pools(topology, placement))
    if names:
        pools = {name: pools[name] for name in names if name in pools}
        if not pools:
            raise CommandError(f"--switch {names[0]}: the job's traffic does not cross it")
    return pools


def _placement(path: Path, settings: Settings) -> Any:
    from planner import placement_from_pods
    from webhook.cli.plan_case import guarded, load_objects

    pods = load_objects(path, "--pods")
    keys = tuple(dict.fromkeys(key for profile in settings.profiles for key in profile.device_annotation_keys))
    return guarded("--pods", path, lambda: placement_from_pods(pods, annotation_keys=keys))


def _print_probes(args: argparse.Namespace) -> int:
    from planner import dump_hash_probes, probe_tuples
    from webhook.cli.plan_case import guarded

    for flag in ("samples", "hash_model"):
        if getattr(args, flag) is not None:
            raise CommandError(f"--{flag.replace('_', '-')}: does not apply with --print-probes")
    if args.count is not None and args.count < 1:
        raise CommandError(f"--count {args.count}: must be at least 1")
    settings = read_settings(args.settings, "--settings")
    ports = source_ports(args, settings)
    topology = read_topology(args, settings)
    switches = _switches(topology)
    pools = _probe_pools(args, settings, topology, switches)
    probes: dict[str, SwitchProbes] = guarded(
        "probes", None, lambda: probe_tuples(pools, switches=switches, ports=ports, count=args.count, rng=args.seed)
    )
    lines = (line for planned in probes.values() for line in dump_hash_probes(planned.probes))
    if args.out is None:
        sys.stdout.writelines(lines)
    else:
        with staged_file(args.out, flag="--out") as temporary, temporary.open("w", encoding="utf-8") as out:
            out.writelines(lines)
    _probe_summary(probes, args)
    return 0


def _probe_summary(probes: Mapping[str, SwitchProbes], args: argparse.Namespace) -> None:
    total = sum(len(planned.probes) for planned in probes.values())
    short = [planned for planned in probes.values() if planned.covered_bits < planned.span_bits]
    for planned in short:
        log.warning(
            "%s: its %d probes span %d of the %d key bits the addresses and ports vary; the model will be exact only "
            "on those (drop --count for enough)",
            planned.switch,
            len(planned.probes),
            planned.covered_bits,
            planned.span_bits,
        )
    spans = sorted({planned.span_bits for planned in probes.values()})
    where = f" into {args.out}" if args.out is not None else ""
    log.info(
        "%d probes for %d switches%s (%s key bits vary); ask each switch which next hop each takes, fill in "
        "next_hop, then run ringroute fabric calibrate --samples FILE --out MODEL",
        total,
        len(probes),
        where,
        "-".join(str(s) for s in (spans[0], spans[-1])) if len(spans) > 1 else spans[0],
    )


# -- show ----------------------------------------------------------------------------------------------------------


def _describe(switch: SwitchHash) -> str:
    from planner import HashSpec, describe_switch_hash

    described = describe_switch_hash(switch)
    if isinstance(switch.hash, HashSpec) and switch.hash.members is not None:
        described += f"; members {', '.join(switch.hash.members)}"
    return described


def run_show(args: argparse.Namespace) -> int:
    """`ringroute fabric show`: one line per tier default and switch."""
    from planner import tier_of_switch_name

    model = _hash_model(args.hash_model)
    if model.is_empty and not model.unknown:
        print("the model knows no switch")
        return 0
    for tier, switch in model.tiers.items():
        print(printable(f"every {tier} switch: {_describe(switch)}"))
    for name in sorted(model.switches):
        tier = tier_of_switch_name(name)
        print(printable(f"{name} ({tier}): {_describe(model.switches[name])}"))
    if model.unknown:
        print(printable(f"unknown (ECMP as it comes, never a tier default): {', '.join(sorted(model.unknown))}"))
    return 0


__all__ = ["register", "run_calibrate", "run_show"]
