"""The hashes a run folder records for its parts and checkpoints: BLAKE3 in new folders, SHA-256
in folders written before issue 49, which still read, verify and resume."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_resume import disk_hashes, fail_at_frame, reference, run, scenario, strict

from wflsim.analysis.io import load_events
from wflsim.sim import rundir

#: The resume scenario with its channel table recorded (``channel_parts`` entries as well).
CHANNEL_RECORD = "\n[channel]\nrecord = true\n"


def failed_run(tmp_path: Path, monkeypatch, frame: int = 3) -> tuple[Path, Path]:
    """A run of the resume scenario (channel recorded) that failed in frame ``frame``:
    (scenario file, run folder)."""
    path, out = scenario(tmp_path), tmp_path / "run"
    path.write_text(path.read_text() + CHANNEL_RECORD)
    with monkeypatch.context() as m:
        fail_at_frame(m, frame)
        assert run(str(path), "--out", str(out)) == 1
    return path, out


def as_written_before(out: Path) -> None:
    """Rewrite ``out``'s manifest as wflsim wrote it before issue 49: every part and checkpoint
    entry with a ``"sha256"`` key holding the SHA-256 of its file (hashlib, read here) in place
    of ``"blake3"``. The checkpoint that ``previous_checkpoint`` names is no longer on disk:
    its entry gets a SHA-256 that matches no file, as an old folder's would."""
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("parts", "channel_parts"):
        for e in manifest.get(key) or []:
            del e["blake3"]
            e["sha256"] = hashlib.sha256((out / e["file"]).read_bytes()).hexdigest()
    for key in ("checkpoint", "previous_checkpoint"):
        e = manifest.get(key)
        if isinstance(e, dict):
            del e["blake3"]
            file = out / e["file"] if key == "checkpoint" else None
            data = file.read_bytes() if file is not None else b"a replaced checkpoint"
            e["sha256"] = hashlib.sha256(data).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))


def test_a_new_folder_records_the_blake3_of_every_part_and_checkpoint(tmp_path, monkeypatch):
    """Parts, channel parts and the checkpoint carry "blake3" (no "sha256"): the BLAKE3 of the
    file's bytes, computed here by the blake3 package."""
    _, out = failed_run(tmp_path, monkeypatch)
    manifest = strict(out / "manifest.json")
    entries = [*manifest["parts"], *manifest["channel_parts"], manifest["checkpoint"]]
    assert len(entries) == 3 + 3 + 1
    for e in entries:
        assert "sha256" not in e
        assert e["blake3"] == blake3.blake3((out / e["file"]).read_bytes()).hexdigest()


def test_an_old_folder_with_sha256_entries_still_reads_verified(tmp_path, monkeypatch):
    """A folder whose manifest records SHA-256 (as before issue 49) reads with every part's
    hash checked, to the same events as before the rewrite."""
    _, out = failed_run(tmp_path, monkeypatch)
    before = load_events(out)
    as_written_before(out)
    assert load_events(out, verify=True).equals(before)


def test_an_old_folder_part_replaced_is_refused_by_its_sha256(tmp_path, monkeypatch):
    """In an old folder a part replaced by another frame's is refused, naming SHA-256."""
    _, out = failed_run(tmp_path, monkeypatch)
    as_written_before(out)
    events = out / "events"
    (events / "part-000002.parquet").write_bytes((events / "part-000001.parquet").read_bytes())
    with pytest.raises(ValueError, match="part-000002.parquet: does not match the SHA-256"):
        load_events(out)


def test_an_old_folder_resumes_to_the_uninterrupted_events(tmp_path, monkeypatch):
    """An old folder failed in frame 3 resumes (its parts and checkpoint checked by SHA-256) to
    the uninterrupted run's events; its kept parts keep their SHA-256 entries, the new ones
    carry BLAKE3, and the mixed folder reads verified."""
    path, out = failed_run(tmp_path, monkeypatch)
    as_written_before(out)
    assert run("--resume", str(out)) == 0
    manifest = strict(out / "manifest.json")
    assert manifest["status"] == "completed"
    assert [sorted({"sha256", "blake3"} & set(e)) for e in manifest["parts"]] == [
        ["sha256"]
    ] * 3 + [["blake3"]] * 3
    assert disk_hashes(out) == reference(path)
    assert len(load_events(out, verify=True)) > 0


def test_an_old_folder_with_another_checkpoint_is_refused(tmp_path, monkeypatch, capsys):
    """An old folder whose checkpoint matches neither SHA-256 the manifest records: --resume
    exits 2 naming the checkpoint, SHA-256 and --overwrite."""
    _, out = failed_run(tmp_path, monkeypatch)
    as_written_before(out)
    data = bytearray((out / "checkpoint.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (out / "checkpoint.npz").write_bytes(bytes(data))
    capsys.readouterr()
    assert run("--resume", str(out)) == 2
    err = capsys.readouterr().err
    assert "checkpoint.npz" in err and "SHA-256" in err and "--overwrite" in err


@pytest.mark.parametrize(
    "change",
    [{"sha256": "0" * 64}, {"blake3": None}, {"blake3": 7}],
    ids=["both hashes", "no hash", "not a string"],
)
def test_a_part_entry_without_exactly_one_hash_is_refused(tmp_path, change):
    """A manifest's part entry with both hashes, none or a non-string one is an edited
    manifest: refused with one line naming the entry and both hash names."""
    entry = {"file": "events/part-000000.parquet", "frame": 0, "rows": 1, "blake3": "ab"}
    entry.update(change)
    entry = {k: v for k, v in entry.items() if v is not None}
    with pytest.raises(rundir.RunFolderError, match="entry 0 of its 'parts'.*blake3 or sha256"):
        rundir.listed_parts(tmp_path, {"parts": [entry]})


@settings(max_examples=25, deadline=None)
@given(data=st.binary(max_size=5000), algorithm=st.sampled_from(sorted(rundir.DIGESTS)))
def test_a_file_hash_is_the_reference_hash_of_its_bytes(tmp_path_factory, data, algorithm):
    """file_digest of any bytes equals hashlib's SHA-256 or the blake3 package's BLAKE3."""
    path = tmp_path_factory.mktemp("f") / "x.bin"
    path.write_bytes(data)
    ref = hashlib.sha256(data) if algorithm == "sha256" else blake3.blake3(data)
    assert rundir.file_digest(path, algorithm) == ref.hexdigest()
