"""Writing a run folder frame by frame, so that a crash loses at most the frame in flight.

Within a frame the engine hands its rows to :meth:`RunRecorder.slot_done` whenever a slot ends
with at least ``Engine.row_group_rows`` rows buffered: the recorder turns them into an Arrow table
on the simulation's thread and one background thread encodes it as a row group of the frame's
part, a hidden temporary file (so the rows leave memory slot by slot, and at most two row groups
are held, however many devices run). A frame expected to hold :data:`SHARD_MIN_ROWS` rows or
more (from the rows of its first slots), on a machine of several cores, is written as several
shard files instead, ``part-NNNNNN-00.parquet``, ``part-NNNNNN-01.parquet``, ..., one per core,
each a contiguous run of the frame's slots encoded by a thread of its own (:class:`ShardedPart`),
so that a shard is encoded while the simulation produces the next one's slots. At the end of
every frame the engine hands the rest to :meth:`RunRecorder.frame_done`. The recorder takes, every ``run.checkpoint_every_frames``
frames, the state of every component as checkpoint bytes on the simulation's thread, then the
background thread, while the next frame is simulated:

1. completes ``events/part-NNNNNN.parquet`` (the last row group, the footer, fsync, rename from
   the temporary name, fsync of the folder), or each of the frame's shards the same way, in
   order;
2. replaces ``manifest.json`` (same way) listing the parts with their row counts and hashes
   (BLAKE3, :data:`wflsim.sim.rundir.DIGEST`; computed by a thread of its own as the part is
   written), the heartbeat and the summary of the completed frames and, if this frame is
   checkpointed, the hash of its checkpoint (``checkpoint``) and of the one it replaces
   (``previous_checkpoint``);
3. writes ``checkpoint.npz`` the same way, if this frame is checkpointed.

At most one frame is in flight (the shards of the next frame are encoded meanwhile, but only
its own completion, after this one's, renames them into place), so memory stays bounded, and the
steps run in this order, so the files on disk always agree: the manifest lists only complete
parts (a sharded frame once all its shards are in place), and a checkpoint of frame
``k`` exists only once every part up to ``k`` is complete and listed, with the checkpoint's own
hash, in the manifest. ``--resume`` checks every file it keeps against these hashes (the
checkpoint on disk is the manifest's ``checkpoint`` or, after a kill between steps 2 and 3, its
``previous_checkpoint``; none where that is null). A heartbeat thread refreshes the
manifest's ``heartbeat_at`` every :data:`wflsim.sim.rundir.HEARTBEAT_S` seconds so that readers on
other hosts can tell a live run from a dead one (on this host the pid tells).

An error of the background write (a full disk) is raised on the simulation's thread at the next
frame or at :meth:`RunRecorder.flush`; the run then ends as ``failed`` and the frames completed
before stay readable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from wflsim.sim import rundir, state
from wflsim.sim.files import NOFOLLOW
from wflsim.sim.trace import (
    EVENTS_DIR,
    MAX_SHARDS,
    SCHEMA,
    Compression,
    TraceBuffer,
    encode_part,
    fsync_dir,
    parquet_options,
    part_name,
    shard_name,
    temporary_path,
    trace_metadata,
    write_atomic,
    write_json_atomic,
)
from wflsim.sim.world.channel.record import ChannelRecorder

from .folders import now_iso

log = logging.getLogger(__name__)


class _GrowingFileHasher:
    """The hash of a file that another thread appends to, computed in a thread of its own as the
    file grows: each :meth:`poke` (after a row group is written) makes the thread read the bytes
    added since, from the page cache, and hash them. A Parquet file is written front to back and
    never rewritten, so the bytes already hashed are final; :meth:`hexdigest`, once the writer
    has flushed its last byte, hashes the rest. The writer's own path (Arrow's encoder writing to
    a native file) thus never holds the GIL nor copies a byte for the hash. After each catch-up
    the thread also starts the bytes on their way to disk (``fdatasync``), which leaves the
    part's own fsync (:meth:`PartWriter.finish`, still the one that makes it durable) little to
    wait for."""

    def __init__(self, path: Path, algorithm: str = rundir.DIGEST) -> None:
        self.algorithm = algorithm
        self._fd = os.open(path, os.O_RDONLY | NOFOLLOW)
        self._hash = rundir.new_hasher(algorithm)
        self._done = 0
        self._wake = threading.Event()
        self._last = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="wflsim-hash", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                last = self._last
                self._catch_up()
                if last:
                    return
                # the bytes hashed so far go to disk now, beside the encoding, so that the
                # part's fsync at the frame's end (on the path the run waits for) has little left;
                # best effort: that fsync, on the writer's own descriptor, reports any error
                with contextlib.suppress(OSError):
                    _fdatasync(self._fd)
        except BaseException as err:  # raised by hexdigest
            self._error = err

    def _catch_up(self) -> None:
        size = os.fstat(self._fd).st_size
        while self._done < size:
            chunk = os.pread(self._fd, min(HASH_CHUNK_BYTES, size - self._done), self._done)
            if not chunk:
                raise OSError(f"{self._fd}: the file shrank while it was hashed")
            self._hash.update(chunk)
            self._done += len(chunk)

    def poke(self) -> None:
        """Hash what the file holds now (in the hash thread; returns at once)."""
        self._wake.set()

    def finish(self) -> None:
        """The writer has written its last byte: hash the rest (returns at once)."""
        self._last = True
        self._wake.set()

    def hexdigest(self) -> str:
        """The hash of the whole file (after :meth:`finish`; waits for the hash thread)."""
        self.finish()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._hash.hexdigest()

    def close(self) -> None:
        """Stop the thread (whatever it hashed) and close the file it reads."""
        if self._fd >= 0:
            self.finish()
            self._thread.join()
            os.close(self._fd)
            self._fd = -1


#: flush a file's data (not its metadata) to disk: ``fdatasync`` where the system has it
_fdatasync = getattr(os, "fdatasync", os.fsync)

#: bytes the hash thread reads and hashes at a time
HASH_CHUNK_BYTES = 4 << 20

#: bytes the part writer buffers before it writes them to the file
WRITE_BUFFER_BYTES = 8 << 20


class PartWriter:
    """One frame's part, written row group by row group to a hidden temporary file and renamed
    into place, complete, by :meth:`finish` (so a reader or a resume never sees half a part)."""

    def __init__(
        self, path: Path, metadata: Mapping[bytes, bytes], compression: Compression = "lz4"
    ) -> None:
        self.path = Path(path)
        self.compression: Compression = compression
        self.tmp = temporary_path(self.path)
        self.rows = 0
        self._schema = SCHEMA.with_metadata(metadata)
        # a native file: Arrow's encoder writes it without the GIL (the simulation's thread
        # keeps it meanwhile), in writes of WRITE_BUFFER_BYTES instead of one per page
        self._file = pa.OSFile(str(self.tmp), mode="w")
        self._sink = pa.BufferedOutputStream(self._file, buffer_size=WRITE_BUFFER_BYTES)
        try:
            self._hasher = _GrowingFileHasher(self.tmp)
        except BaseException:
            self._sink.close()
            self.tmp.unlink(missing_ok=True)
            raise
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        """Append ``table`` (:data:`wflsim.sim.trace.SCHEMA`) as one row group."""
        if self._writer is None:
            self._writer = pq.ParquetWriter(
                self._sink, self._schema, **parquet_options(self._schema, self.compression)
            )
        self._writer.write_table(table.replace_schema_metadata(self._schema.metadata))
        self.rows += table.num_rows
        self._hasher.poke()

    @property
    def algorithm(self) -> str:
        """The hash :meth:`finish` returns (a key of :data:`wflsim.sim.rundir.DIGESTS`)."""
        return self._hasher.algorithm

    def finish(self) -> str:
        """Close the file, make it durable and rename it into place; its hash
        (:attr:`algorithm`), computed while the file is made durable."""
        if self._writer is None:
            self.write(SCHEMA.empty_table())
        assert self._writer is not None
        self._writer.close()
        self._sink.flush()  # every byte in the file
        self._hasher.finish()  # the last bytes hashed while the file is made durable
        os.fsync(self._file.fileno())
        self._sink.close()
        digest = self._hasher.hexdigest()
        self._hasher.close()
        os.replace(self.tmp, self.path)
        fsync_dir(self.path.parent)
        return digest

    def complete(self, table: pa.Table) -> list[rundir.PartFile]:
        """Append the part's last rows ``table`` (if any) and :meth:`finish` it; the file it
        left, for the manifest (:func:`wflsim.sim.rundir.part_entry`)."""
        if table.num_rows:
            self.write(table)
        digest = self.finish()
        return [(self.path.name, self.rows, self.algorithm, digest)]

    def abort(self) -> None:
        """Drop the unfinished part (its temporary file), whatever state a failed write left
        it in (a full disk also fails the footer and the close)."""
        writer_close = self._writer.close if self._writer is not None else None
        for step in (writer_close, self._sink.close, self._hasher.close):
            try:
                if step is not None:
                    step()
            except Exception:  # noqa: S110 - a failed write is being abandoned anyway
                pass
        self.tmp.unlink(missing_ok=True)


#: Rows per frame (expected from the rows of its first slots) from which a frame's part is
#: written as shards, each encoded by a thread of its own (:class:`ShardedPart`); below it one
#: file per frame, encoded by the writer thread, as before shards existed.
SHARD_MIN_ROWS = 200_000

#: Rows one shard's encoder may have waiting (handed over, not yet encoded) before the simulation
#: waits for it, or one hand-over if larger: what lets a shard go on encoding while the simulation
#: produces the slots of the next one (four row groups of ``Engine.row_group_rows``: four slots
#: of 100,000 devices at ``device_slots``; one slot at ``events``, whose slots hold more rows).
SHARD_BACKLOG_ROWS = 400_000


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def shard_count(slots_per_frame: int) -> int:
    """How many shards a sharded frame's part is written as: one encoder per available core,
    at most one shard per slot and at most :data:`wflsim.sim.trace.MAX_SHARDS`."""
    return max(1, min(available_cores(), slots_per_frame, MAX_SHARDS))


class ShardedPart:
    """One frame's part written as ``count`` shard files, each a contiguous run of the frame's
    slots (slot ``j`` of ``slots`` goes to shard ``j * count // slots``, or a later one if that
    shard was never opened), each a :class:`PartWriter` encoded by its own thread (``pools``,
    one single-thread executor per shard index), so that a shard encodes while the simulation
    produces the slots of the next. :meth:`complete` finishes every shard (each atomic, fsynced
    and hashed like a part); the frame's manifest entry is written after all of them."""

    def __init__(
        self,
        events_dir: Path,
        frame: int,
        count: int,
        slots: int,
        metadata: Mapping[bytes, bytes],
        compression: Compression,
        pools: list[ThreadPoolExecutor],
    ) -> None:
        self._open = lambda s: PartWriter(events_dir / shard_name(frame, s), metadata, compression)
        self.count = count
        self.slots = slots
        self.rows = 0  # handed over so far
        self.shards: list[PartWriter] = []
        self._pools = pools
        self._target = -1
        self._writes: list[Future[None]] = []  # every shard's, in order
        self._backlog: deque[tuple[Future[None], int]] = deque()  # the current shard's, rows
        self._backlog_rows = 0

    def write(self, slot: int, table: pa.Table) -> None:
        """Hand slot ``slot``'s rows (and any before it since the last call) to their shard's
        encoder; waits while that encoder would have more than :data:`SHARD_BACKLOG_ROWS` rows
        waiting, and raises the error of a write it waited for."""
        target = slot * self.count // self.slots
        if not self.shards or (target > self._target and len(self.shards) < self.count):
            self.shards.append(self._open(len(self.shards)))
            self._target = target
            self._backlog.clear()  # the previous shard encodes on; complete() waits for it
            self._backlog_rows = 0
        while self._backlog and self._backlog_rows + table.num_rows > SHARD_BACKLOG_ROWS:
            done, rows = self._backlog.popleft()
            done.result()
            self._backlog_rows -= rows
        shard = self.shards[-1]
        done = self._pools[len(self.shards) - 1].submit(shard.write, table)
        self._writes.append(done)
        self._backlog.append((done, table.num_rows))
        self._backlog_rows += table.num_rows
        self.rows += table.num_rows

    def complete(self, table: pa.Table) -> list[rundir.PartFile]:
        """Wait for every shard's encoding, append the frame's last rows ``table`` to the last
        shard and finish the shards in order; the files, for the manifest."""
        for done in self._writes:
            done.result()
        files: list[rundir.PartFile] = []
        for i, shard in enumerate(self.shards):
            files += shard.complete(table if i == len(self.shards) - 1 else SCHEMA.empty_table())
        return files

    def abort(self) -> None:
        """Drop the shards not yet in place (after their encoders stop)."""
        wait(self._writes)
        for shard in self.shards:
            shard.abort()


if TYPE_CHECKING:
    from wflsim.sim.engine import Engine


class RunRecorder:
    """The frame sink of a run that writes a run folder (see the module docstring).

    Args:
        folder: the run folder (exists, locked by this process).
        manifest: the manifest so far (scenario, fingerprint, ...); the recorder owns it from
            now on and keeps its ``parts``, ``checkpoint``, ``heartbeat_at`` and ``summary``.
        metadata: key-value metadata stored in every part (scenario, seed, versions).
        frames: the run's number of frames ``K``.
        checkpoint_every: checkpoint after every this many frames (and after the last).
        heartbeat_s: seconds between heartbeats (None: no heartbeat thread).
        channel: with ``[channel] record = true``, the channel's recorder: each frame's channel
            rows go to ``channel/part-NNNNNN.parquet``, written before the frame's events part
            and listed in the manifest's ``channel_parts``.
        compression: the Parquet codec of every part (``[trace] compression``).
    """

    def __init__(
        self,
        folder: Path,
        manifest: dict[str, Any],
        metadata: Mapping[str, str],
        *,
        frames: int,
        checkpoint_every: int,
        heartbeat_s: float | None = rundir.HEARTBEAT_S,
        channel: ChannelRecorder | None = None,
        compression: Compression = "lz4",
    ) -> None:
        self.folder = Path(folder)
        self.compression: Compression = compression
        self.events_dir = self.folder / EVENTS_DIR
        self.events_dir.mkdir(exist_ok=True)
        self.channel = channel
        self.channel_dir = self.folder / rundir.CHANNEL_DIR
        if channel is not None:
            self.channel_dir.mkdir(exist_ok=True)
            self._channel_meta = {k: v for k, v in (channel.schema.metadata or {}).items()}
        self.manifest = manifest
        self.manifest.setdefault("parts", [])
        if channel is not None:
            self.manifest.setdefault("channel_parts", [])
        self._meta = trace_metadata(metadata)
        self.frames = frames
        self.checkpoint_every = max(1, int(checkpoint_every))
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wflsim-trace")
        self._pending: Future[None] | None = None
        self._slot_pending: Future[None] | None = None
        self._part: PartWriter | ShardedPart | None = None  # the frame in progress
        self._shard_pools: list[ThreadPoolExecutor] = []  # one encoder per shard index
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.write_manifest()
        if heartbeat_s:
            self._beat = threading.Thread(
                target=self._heartbeat, args=(heartbeat_s,), name="wflsim-heartbeat", daemon=True
            )
            self._beat.start()

    # ------------------------------------------------------------------ manifest

    def write_manifest(self, **updates: Any) -> None:
        """Apply ``updates`` to the manifest, stamp the heartbeat and replace the file."""
        with self._lock:
            self.manifest.update(updates)
            self.manifest["heartbeat_at"] = now_iso()
            write_json_atomic(self.folder / rundir.MANIFEST, self.manifest)

    def _heartbeat(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.write_manifest()
            except OSError:  # a full disk: the frame writes report it
                pass

    # ------------------------------------------------------------------ frames

    def slot_done(self, engine: Engine, frame: int, buffer: TraceBuffer) -> None:
        """A slot of frame ``frame`` is complete: its rows become a row group of the frame's
        part, encoded by the writer thread. Raises an earlier write error, if any."""
        table = buffer.to_table()
        slots = engine.config.slots_per_frame
        if self._part is None:
            count = shard_count(slots)
            expected = table.num_rows * slots / (engine.frame_slot + 1)
            if count > 1 and expected >= SHARD_MIN_ROWS:
                # shards are renamed into place by the frame's commit, after the previous
                # frame's: their encoding need not wait for it
                while len(self._shard_pools) < count:
                    self._shard_pools.append(
                        ThreadPoolExecutor(
                            max_workers=1,
                            thread_name_prefix=f"wflsim-shard{len(self._shard_pools)}",
                        )
                    )
                self._part = ShardedPart(
                    self.events_dir,
                    frame,
                    count,
                    slots,
                    self._meta,
                    self.compression,
                    self._shard_pools,
                )
        if isinstance(self._part, ShardedPart):
            self._part.write(engine.frame_slot, table)
            return
        self._wait_slot()  # at most one slot in the writer thread, one being built
        if self._part is None:
            self._wait()  # the previous frame's part is in place before this one is opened
            self._part = PartWriter(
                self.events_dir / part_name(frame), self._meta, self.compression
            )
        self._slot_pending = self._pool.submit(self._part.write, table)

    def _wait_slot(self) -> None:
        pending, self._slot_pending = self._slot_pending, None
        if pending is not None:
            pending.result()

    def frame_done(self, engine: Engine, frame: int, buffer: TraceBuffer) -> None:
        """Frame ``frame`` is complete and ``engine`` is at the boundary after it: hand its
        rows (and, if due, a checkpoint) to the writer thread. Raises the previous frame's
        write error, if any."""
        table = buffer.to_table()
        last = frame + 1 >= self.frames or engine.stats.stopped_early is not None
        ckpt = None
        if (frame + 1) % self.checkpoint_every == 0 or last:
            ckpt = state.dumps(state.run_state(engine))
        summary = engine.stats.as_dict()
        channel = self.channel.take_frame() if self.channel is not None else None
        self._wait_slot()
        self._wait()
        if self._part is None:  # a sink used without slot_done: the whole frame at once
            self._part = PartWriter(
                self.events_dir / part_name(frame), self._meta, self.compression
            )
        part = self._part
        log.info(
            "frame %d of %d done: %d events, %.1f J so far",
            frame + 1,
            self.frames,
            part.rows + table.num_rows,
            summary.get("total_energy_j", float("nan")),
        )
        self._pending = self._pool.submit(self._commit, frame, part, table, ckpt, summary, channel)
        self._part = None  # the commit owns it now (and aborts it if it fails)

    def _write_part(
        self, folder: str, frame: int, table: Any, meta: Mapping[bytes, bytes]
    ) -> dict[str, Any]:
        """Write ``table`` as frame ``frame``'s part in ``folder``; its manifest entry."""
        data = encode_part(table, meta, self.compression)
        name = part_name(frame)
        write_atomic(self.folder / folder / name, data)
        digest = rundir.digest_bytes(data)
        return rundir.part_entry(folder, frame, [(name, table.num_rows, rundir.DIGEST, digest)])

    def _commit(
        self,
        frame: int,
        part: PartWriter | ShardedPart,
        table: pa.Table,
        ckpt: bytes | None,
        summary: dict,
        channel: Any,
    ) -> None:
        updates: dict[str, Any] = {}
        try:
            if channel is not None:
                centry = self._write_part(rundir.CHANNEL_DIR, frame, channel, self._channel_meta)
                updates["channel_parts"] = [*self.manifest["channel_parts"], centry]
            files = part.complete(table)
        except BaseException:
            part.abort()
            raise
        entry = rundir.part_entry(EVENTS_DIR, frame, files)
        updates.update(
            parts=[*self.manifest["parts"], entry],
            frames_completed=frame + 1,
            summary=summary,
        )
        if ckpt is not None:  # the manifest names the checkpoint before it replaces the last one
            updates["previous_checkpoint"] = self.manifest.get("checkpoint")
            updates["checkpoint"] = {
                "file": rundir.CHECKPOINT,
                "next_frame": frame + 1,
                rundir.DIGEST: rundir.digest_bytes(ckpt),
            }
        self.write_manifest(**updates)
        if ckpt is not None:
            write_atomic(self.folder / rundir.CHECKPOINT, ckpt)
            log.debug("checkpoint after frame %d: %d bytes", frame + 1, len(ckpt))

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def flush(self) -> None:
        """Wait for the frame in the writer thread; raises its error, if any."""
        self._wait()

    def close(self, **final: Any) -> None:
        """Stop the threads and write the final manifest (``final``: status, error, ...).

        The frame in the writer thread is finished first (its error, if any, is not raised
        here: the run has already failed). A final manifest that cannot be written (a full
        disk) leaves the last one, whose writer is then dead (``crashed`` for readers).
        """
        try:
            self._wait_slot()
            self._wait()
        except Exception:  # noqa: S110 - the run's own error is what gets reported
            pass
        finally:
            self._pool.shutdown(wait=True)
            for pool in self._shard_pools:
                pool.shutdown(wait=True)
            if self._part is not None:  # a frame that never completed leaves no file
                self._part.abort()
                self._part = None
            self._stop.set()
            if self._beat is not None:
                self._beat.join()
        self.write_manifest(**final)
