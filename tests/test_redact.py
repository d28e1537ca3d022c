"""Secret values in a command line or an environment are masked in what gpuwhy writes
(issue #50, item 6): the option's name stays, its value is ``***``; names that only
contain a secret word's letters (``--monkey``, ``--tokenizer``) are left as typed."""

from __future__ import annotations

import pytest

from gpuwhy.facts import ProgramFacts, from_dict, to_dict
from gpuwhy.redact import (
    MASK,
    mask_argv,
    mask_environment,
    mask_text,
    masked_values,
    secret_name,
)


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["--api-key=SECRET123"], ["--api-key=***"]),
        (["--hf-token", "hf_abc"], ["--hf-token", "***"]),
        (["--hf_token", "hf_abc", "--epochs", "3"], ["--hf_token", "***", "--epochs", "3"]),
        (["--password", "pw1"], ["--password", "***"]),
        (["--db-passwd=x"], ["--db-passwd=***"]),
        (["--pwd", "x"], ["--pwd", "***"]),
        (["--client-secret", "s"], ["--client-secret", "***"]),
        (["--credentials", "c"], ["--credentials", "***"]),
        (["--auth", "user:pw"], ["--auth", "***"]),
        (["--apikey", "k"], ["--apikey", "***"]),
        (["--hfToken", "t"], ["--hfToken", "***"]),  # camelCase
        (["-AWS_SECRET_ACCESS_KEY=abc"], ["-AWS_SECRET_ACCESS_KEY=***"]),
        (["HF_TOKEN=hf_abc"], ["HF_TOKEN=***"]),  # env(1)'s assignment
        (["WANDB_API_KEY=k", "python"], ["WANDB_API_KEY=***", "python"]),
        (["model.api_key=xyz"], ["model.api_key=***"]),  # a Hydra override
        (["++auth.token=xyz"], ["++auth.token=***"]),
        (["https://user:pw@host/data"], ["https://user:***@host/data"]),
        (["--data=s3://AKIA:abc@bucket/x"], ["--data=s3://AKIA:***@bucket/x"]),
        (["--url", "https://u:p@ss@host"], ["--url", "https://u:***@host"]),
        (["https://h/x?token=abc&page=2"], ["https://h/x?token=***&page=2"]),
    ],
)
def test_a_secret_value_is_masked(given, shown):
    assert mask_argv(["train.py", *given]) == ("train.py", *shown)


@pytest.mark.parametrize(
    "given",
    [
        ["--keyboard-layout", "us"],
        ["--monkey", "george"],
        ["--tokenizer", "bert"],
        ["--max-tokens", "512"],
        ["--key-file", "/etc/ssl/k.pem"],  # where the key is, not the key
        ["--token-limit", "4096"],
        ["--key-size=2048"],
        ["--author", "me"],
        ["--passes", "3"],
        ["--use-auth-token", "--epochs", "3"],  # a flag: the next option is not its value
        ["--hf-token"],  # nothing after it
        ["--api-key="],  # nothing to hide
        ["--", "--epochs", "3"],
        ["MONKEY=1", "KEYBOARD=us", "PATH=/usr/bin"],
        ["https://host:8080/a@b", "https://user@host/x", "ssh://host/repo"],
        ["https://h/x?page=2&sort=key"],
        ["data/token.txt", "--vocab", "keys.json"],  # paths that name a secret word
    ],
)
def test_what_is_not_a_secret_is_kept_as_typed(given):
    argv = ["train.py", *given]
    assert mask_argv(argv) == tuple(argv)


def test_masking_is_idempotent_and_keeps_the_length():
    argv = ["t.py", "--hf-token", "a", "--api-key=b", "https://u:c@h", "X_TOKEN=d", "-v"]
    once = mask_argv(argv)
    assert mask_argv(once) == once and len(once) == len(argv)
    assert once.count("***") == 1 and all(MASK in a for a in once[2:6])


def test_secret_names_match_whole_segments():
    assert secret_name("--hf-token") and secret_name("HF_TOKEN") and secret_name("apiKey")
    assert secret_name("db.password") and secret_name("x-auth")
    assert not secret_name("--monkey") and not secret_name("tokens")
    assert not secret_name("--keystone") and not secret_name("--secretary")


def test_the_environment_masks_secret_names_and_url_passwords():
    env = {
        "HF_TOKEN": "hf_abc",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HTTPS_PROXY": "http://me:pw@proxy:3128",
        "XLA_FLAGS": "--xla_gpu_autotune_level=2",
        "EMPTY_SECRET": "",
    }
    assert mask_environment(env) == {
        "HF_TOKEN": "***",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HTTPS_PROXY": "http://me:***@proxy:3128",
        "XLA_FLAGS": "--xla_gpu_autotune_level=2",
        "EMPTY_SECRET": "",
    }


def test_text_masks_only_urls_passwords_and_secret_parameters():
    assert mask_text("see https://a:b@c.io/x?key=1&n=2") == "see https://a:***@c.io/x?key=***&n=2"
    assert mask_text("no secret here: key, token") == "no secret here: key, token"


def test_masked_values_are_what_was_hidden():
    argv = ["t.py", "--api-key=SECRET123", "--hf-token", "hf_abcdef", "--pwd", "ab"]
    assert masked_values(argv) == ("SECRET123", "hf_abcdef")  # "ab": too short to mask


def test_program_facts_hold_the_masked_command_and_error():
    """The section is where every writer reads the command line from: masked as it is
    made, and again when an older record is read back."""
    program = ProgramFacts(
        command=("train.py", "--api-key", "SECRET123"),
        ended="exception",
        error="PermissionError: key SECRET123 refused by https://u:pw@hub",
    )
    assert program.command == ("train.py", "--api-key", "***")
    assert program.error == "PermissionError: key *** refused by https://u:***@hub"
    old = to_dict(ProgramFacts(command=("t.py",)))
    old["command"] = ["t.py", "--hf-token", "hf_abc"]  # as an older gpuwhy wrote it
    assert from_dict(ProgramFacts, old).command == ("t.py", "--hf-token", "***")
