"""Secret values masked out of the command lines and environments gpuwhy writes.

A training job's command line often carries a credential (``--hf-token hf_...``,
``--api-key=...``, ``https://user:password@host/data``, ``HF_TOKEN=...`` before the
program under ``gpuwhy watch -- env ...``). gpuwhy keeps the command line in every
record, SARIF file and report, and in the ``command`` label of its live metrics, which
anyone who can reach the metrics port or read a CI's artifacts can read. Each such value
is replaced by ``***`` where gpuwhy records the command line; the option's name stays, so
the report still says what ran. The program's own ``sys.argv`` is never touched.

A name looks secret when one of its segments (split at ``-``, ``_``, ``.`` and
camelCase) is a secret word (``token``, ``key``, ``secret``, ``password`` ...) and none
says the value is something else about it (``--key-file``, ``--token-limit``): whole
segments only, so ``--monkey`` and ``--tokenizer`` stay as typed. Masking is idempotent:
a masked command line masks to itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MASK = "***"

# a segment that alone makes a name secret
_SECRET = frozenset(
    {
        "token",
        "key",
        "apikey",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "credential",
        "credentials",
        "auth",
        "authorization",
        # common run-together spellings (whole segments: ``monkey`` is not one)
        "apitoken",
        "authtoken",
        "accesstoken",
        "accesskey",
        "secretkey",
        "privatekey",
        "hftoken",
    }
)
# a segment that says the value is not the secret itself, but where it is or how big
_NOT_THE_VALUE = frozenset(
    {"file", "path", "dir", "size", "len", "length", "bits", "count", "num", "max", "min", "limit"}
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEGMENTS = re.compile(r"[-_.]+")
# NAME=VALUE where NAME is an identifier (env(1)'s assignments, Hydra's overrides)
_ASSIGNMENT = re.compile(r"(\+{0,2}[A-Za-z_][A-Za-z0-9_.\-]*)=(.*)", re.DOTALL)
# scheme://user:password@ : the password, up to the last @ of the authority
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@?#]*:)([^/\s?#]+)(?=@)")
# ?name=value and &name=value in a URL
_QUERY_PARAMETER = re.compile(r"([?&])([^=&#\s]+)=([^&#\s]*)")


def secret_name(name: str) -> bool:
    """Whether an option, variable or parameter called ``name`` (``--hf-token``,
    ``WANDB_API_KEY``, ``model.apiKey``) holds a secret."""
    segments = {s.lower() for s in _SEGMENTS.split(_CAMEL.sub("_", name.lstrip("-+"))) if s}
    return bool(segments & _SECRET) and not segments & _NOT_THE_VALUE


def mask_text(text: str) -> str:
    """``text`` with the passwords of URLs (``https://user:***@host``) and the values
    of their secret query parameters (``?token=***``) masked."""
    if "://" not in text and "?" not in text:
        return text
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    return _QUERY_PARAMETER.sub(
        lambda m: f"{m.group(1)}{m.group(2)}={MASK}"
        if m.group(3) and secret_name(m.group(2))
        else m.group(0),
        text,
    )


def mask_argv(argv: Iterable[str]) -> tuple[str, ...]:
    """``argv`` as gpuwhy writes it: the value of each secret option (``--api-key=***``,
    ``--hf-token ***``) and assignment (``HF_TOKEN=***``), and the passwords in URLs,
    masked. A secret option followed by another option (``--use-auth-token --epochs 3``:
    a flag) leaves that option as it is."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next and arg and not arg.startswith("-"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        out.append(_masked_arg(arg))
        if arg.startswith("-") and "=" not in arg and arg != "--":
            mask_next = secret_name(arg)
    return tuple(out)


def _masked_arg(arg: str) -> str:
    if arg.startswith("-"):
        name, equals, value = arg.partition("=")
        if equals and value and secret_name(name):
            return f"{name}={MASK}"
        return mask_text(arg)
    assignment = _ASSIGNMENT.fullmatch(arg)
    if assignment and assignment.group(2) and secret_name(assignment.group(1)):
        return f"{assignment.group(1)}={MASK}"
    return mask_text(arg)


def mask_environment(env: Mapping[str, str]) -> dict[str, str]:
    """Environment entries as gpuwhy writes them: the value of each whose name looks
    secret masked, and the passwords of URLs in the others."""
    return {k: MASK if v and secret_name(k) else mask_text(v) for k, v in env.items()}


def masked_values(argv: Iterable[str]) -> tuple[str, ...]:
    """The values :func:`mask_argv` hides in ``argv`` (what else gpuwhy writes of the
    program, its exception's last line, must not repeat them); values shorter than 4
    characters are left out, as masking them elsewhere would mask ordinary text."""
    given = tuple(argv)
    hidden: list[str] = []
    for arg, shown in zip(given, mask_argv(given)):
        if arg == shown:
            continue
        hidden += [part for part in _differences(arg, shown) if len(part) >= 4]
    return tuple(dict.fromkeys(hidden))


def _differences(arg: str, shown: str) -> list[str]:
    """The parts of ``arg`` that ``shown`` has as ``***``."""
    pattern = "(.+?)".join(re.escape(piece) for piece in shown.split(MASK))
    found = re.fullmatch(pattern, arg, re.DOTALL)
    return [g for g in found.groups() if g != MASK] if found else []


def mask_values(text: str, values: Iterable[str]) -> str:
    """``text`` with each of ``values`` replaced by ``***``, and URLs' passwords."""
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return mask_text(text)
