"""The rules of deny-dangerous-bash, in plain Python (no component imports).

A line-by-line port of `plugins/deny-dangerous-bash/src/lib.rs`: the integration tests
run both plugins through hookhost on the same inputs and require equal decisions.
This module is shared by the component (`app.py`) and the command-hook twin used by the
benchmark (`command_hook.py`).
"""

from typing import Optional

_PREFIXES = ("sudo", "doas", "nohup", "command", "exec")
_ROOTS = ("/", "/*", "~", "~/", "$HOME", "${HOME}", "/.", "--no-preserve-root")
_SHELLS = ("sh", "bash", "zsh", "dash", "ksh", "python", "python3")


def _segments(c: str):
    out = [c]
    for sep in "&;|":
        out = [piece for part in out for piece in part.split(sep)]
    return [s.strip() for s in out]


def danger(command: str) -> Optional[str]:
    """Why `command` is dangerous, or None."""
    c = " ".join(command.split())
    for segment in _segments(c):
        words = segment.split(" ")
        while words and words[0] in _PREFIXES:
            words = words[1:]
        first = words[0] if words else None
        if first is not None and (first == "rm" or first.endswith("/rm")):
            flags = "".join(w.lstrip("-") for w in words if w.startswith("-"))
            recursive = "r" in flags or "R" in flags or "--recursive" in words
            targets = [w for w in words[1:] if not w.startswith("-")]
            if recursive and any(t in _ROOTS for t in targets):
                return "recursive delete of the filesystem root or home directory"
            if "--no-preserve-root" in words:
                return "rm with --no-preserve-root"
        if first is not None and (
            first.startswith("mkfs") or (first == "dd" and "of=/dev/" in segment)
        ):
            return "writes to a raw disk device"
    if ("curl " in c or "wget " in c) and _pipes_into_shell(c):
        return "pipes a download straight into a shell"
    if (
        "git push" in c
        and ("--force" in c or " -f" in c or "+main" in c or "+master" in c)
        and ("main" in c or "master" in c)
    ):
        return "force-push to main/master"
    if ":(){ :|:& };:" in c or ":(){ :|: & };:" in c:
        return "fork bomb"
    return None


def _pipes_into_shell(c: str) -> bool:
    for part in c.split("|")[1:]:
        first = next((w for w in part.strip().split(" ") if w != "sudo"), "")
        if first.rsplit("/", 1)[-1] in _SHELLS:
            return True
    return False


def decide(event_name: str, tool_name: Optional[str], tool_input) -> Optional[str]:
    """The deny reason for one event, or None for no opinion."""
    if event_name != "PreToolUse" or tool_name != "Bash":
        return None
    if not isinstance(tool_input, dict):
        raise ValueError("tool_input: expected an object")
    command = tool_input.get("command", "")
    if not isinstance(command, str):
        raise ValueError("tool_input.command: expected a string")
    why = danger(command)
    if why is None:
        return None
    return f"deny-dangerous-bash: {why}: `{command.strip()}`"
