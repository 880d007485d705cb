"""The argparse behaviour every `ringroute` command shares.

- A usage error is one line on stderr with exit status 2, like every other error of the command line.
- The global options (`--log-level`, `--version`) work before or after the command: every parser carries them,
  and only the top-level parser has a default, so a value given after the command wins.
- Help shows each option's default.
- A renamed option keeps its old spelling as a hidden alias: accepted, absent from help and messages.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from webhook.cli.errors import printable

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
DEFAULT_LOG_LEVEL = "INFO"


def log_level(text: str) -> str:
    """`--log-level` value, any case, as the upper-case name `logging` takes."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a log level; choose one of {', '.join(LOG_LEVELS)}")
    return level


def package_version() -> str:
    """The installed distribution's version (what `pip show ringroute` says)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ringroute")
    except PackageNotFoundError:
        return "unknown (not installed as a package; run pip install .)"


class _VersionAction(argparse.Action):
    """`--version`: looks the version up only when asked, so parsing stays free of importlib.metadata."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "print ringroute's version and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(  # argparse's signature; only the parser is needed
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,  # noqa: ARG002
        values: Any,  # noqa: ARG002
        option_string: Any = None,  # noqa: ARG002
    ) -> None:
        sys.stdout.write(f"ringroute {package_version()}\n")
        parser.exit(0)


class HelpFormatter(argparse.HelpFormatter):
    """Appends `(default: X)` to options that have a default and do not state it, and leaves hidden aliases out."""

    def __init__(self, prog: str, hidden: frozenset[str] = frozenset(), **kwargs: Any) -> None:
        super().__init__(prog, **kwargs)
        self._hidden = hidden

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "(default" in text
            or not action.option_strings
            or action.required
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
        ):
            return text
        return f"{text} (default: %(default)s)"

    def _format_action_invocation(self, action: argparse.Action) -> str:
        shown = [s for s in action.option_strings if s not in self._hidden]
        if len(shown) == len(action.option_strings):
            return super()._format_action_invocation(action)
        # Format as if the hidden spellings were never registered.
        visible = argparse.Action(
            shown, action.dest, nargs=action.nargs, choices=action.choices, metavar=action.metavar
        )
        return super()._format_action_invocation(visible)


class RingrouteParser(argparse.ArgumentParser):
    """An ArgumentParser with one-line errors, the global options, defaults in help and hidden aliases.

    Sub-command parsers are made by the same class (argparse's default), so every command gets all of it.
    """

    def __init__(self, *args: Any, top_level: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        self._hidden: set[str] = set()  # before super().__init__, which formats the -h option
        super().__init__(*args, **kwargs)
        common = self._global_options = self.add_argument_group("global options (before or after the command)")
        common.add_argument(
            "--log-level",
            type=log_level,
            metavar="LEVEL",
            # Only the top-level parser has a default: a command's parser must not overwrite a level given before it.
            default=DEFAULT_LOG_LEVEL if top_level else argparse.SUPPRESS,
            help=f"{', '.join(LOG_LEVELS)}, in any case (default: {DEFAULT_LOG_LEVEL})",
        )
        common.add_argument("--version", action=_VersionAction)
        # The parser that parsed last is the command's own (sub-command defaults override their parents').
        self.set_defaults(command_prog=self.prog)

    def hide(self, *option_strings: str) -> None:
        """Accept `option_strings` (already added, as extra names of an option) but leave them out of help."""
        for option in option_strings:
            if option not in self._option_string_actions:
                raise ValueError(f"{option}: not an option of {self.prog}")
            self._hidden.add(option)

    def format_help(self) -> str:
        # The global options come last in help, after the command's own options.
        self._action_groups.remove(self._global_options)
        self._action_groups.append(self._global_options)
        return super().format_help()

    def _get_formatter(self) -> argparse.HelpFormatter:
        return HelpFormatter(prog=self.prog, hidden=frozenset(self._hidden))

    def error(self, message: str) -> NoReturn:
        for option in self._hidden:  # argparse names an option by all its spellings: "--out-dir/--out"
            message = message.replace(f"/{option}", "")
        self.exit(2, printable(f"{self.prog}: error: {message}; see {self.prog} --help") + "\n")


def hide_alias(parser: argparse.ArgumentParser, *option_strings: str) -> None:
    """Keep the old spellings of a renamed option working without showing them (see RingrouteParser.hide)."""
    if not isinstance(parser, RingrouteParser):
        raise TypeError(f"{parser.prog}: hidden aliases need a RingrouteParser")
    parser.hide(*option_strings)


__all__ = ["DEFAULT_LOG_LEVEL", "LOG_LEVELS", "HelpFormatter", "RingrouteParser", "hide_alias", "log_level"]
