"""Every option of every command says what it does and shows its default."""

from __future__ import annotations

import argparse

from rxtoolcalls.__main__ import _parser


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    found = {"rxtoolcalls": parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def test_there_are_the_documented_commands() -> None:
    assert set(_commands()) == {"rxtoolcalls", "replay", "record", "export", "serve", "chat"}


def test_every_option_has_help_with_its_default() -> None:
    for name, command in _commands().items():
        for action in command._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert action.help, (name, action.dest)
            if action.option_strings and not action.required:
                text = action.help % {"default": action.default}
                assert "(default: " in text or "default: " in text, (name, action.dest)


def test_defaults_are_the_values_shown() -> None:
    commands = _commands()
    serve_help = commands["serve"].format_help()
    assert "(default: 8765)" in serve_help
    chat_help = " ".join(commands["chat"].format_help().split())
    assert "(default: 8)" in chat_help
    assert "(default: 2)" in chat_help
