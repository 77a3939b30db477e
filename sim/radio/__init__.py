"""The radio: how the uploads of a slot reach the server (the scenario's ``[uplink]`` and
``[cells]``).

**Uplink modes.** Every ``[uplink] mode`` is one module with one class implementing the protocol
:class:`~wflsim.sim.radio.base.UplinkMode`, registered in :mod:`wflsim.sim.radio.modes` (the
registry, above the modules it lists). A mode decides *when* each upload ends, or that it did not;
*who* takes part and at what power stays the scheme's.

* ``dedicated`` (:mod:`.dedicated`, the paper's model): every device has its own band ``W`` with
  noise power ``N0`` over it; uploads do not interact, and the closed-form kernel plays them.
* ``ofdma`` (:mod:`.ofdma`): one band ``W`` shared by processor sharing. With ``k`` uploads in
  flight each gets ``b = W / k``; its noise power is ``N0' b`` (``N0' = N0 / W``, the noise power
  spectral density), so its rate is ``r = b log2(1 + p h / (N0' b))``
  (:func:`~wflsim.sim.radio.rates.shared_rate_bps`). Whenever an upload starts or ends, every
  other upload's remaining bits are advanced at its old rate and its rate is recomputed; one
  completion event is pending at any time (:class:`~wflsim.sim.radio.sharing.ProcessorSharing`).
* ``tdma`` (:mod:`.tdma`): one upload at a time on the whole band, at ``r = W log2(1 + p h /
  N0)``; the others wait in a queue (``fcfs``: by ready time = compute end, ties by device;
  ``edf``: by deadline, then as ``fcfs``) and waiting counts against the deadline.
* ``aircomp`` (:mod:`.aircomp`): every participant sends its update at once on ``W`` and the
  server receives their noisy, power-controlled sum: one common transmission, a closed form for
  every kernel.
* With several cells (:mod:`.cells`) whose uploads interact (a cell shares its band, or two cells
  share one), the digital modes give the cells' uplink
  (:class:`~wflsim.sim.radio.cells.uplink.CellularUplink`): each cell shares its band its own
  way, and an upload's rate follows its SINR (:mod:`.interference`), recomputed whenever an
  upload starts or ends in a co-band cell.

**The shared uplink.** A mode whose uploads interact builds a SimPy component
(:class:`~wflsim.sim.radio.shared.SharedUplink`), used in one of two ways:

* **per slot** (:meth:`~wflsim.sim.radio.shared.SharedUplink.open_slot`, the synchronous
  server's event kernel, :class:`wflsim.sim.kernels.EventKernel`): the slot's outcome (the time
  each upload actually transmitted, whether it arrived in time) comes from its events. Under a
  scheme that closes the slot at the deadline, uploads still in flight or still waiting are cut
  there; under one that waits for the last upload nothing is cut (an upload that can never
  finish, at zero power or gain, transmits until the deadline and fails, as on a dedicated
  band). State: none across slots; every upload ends or is cut by its slot's end.
* **continuous** (:meth:`~wflsim.sim.radio.shared.SharedUplink.open_run`, the
  stale-update server, :class:`wflsim.sim.servers.stale.StaleServer`): one uplink for the whole
  run; a device's upload joins it with its own power, gain and payload
  (:meth:`~wflsim.sim.radio.shared.SharedUplink.upload`; at most one upload per device at
  a time) and keeps its share across slot boundaries: rates are recomputed at every start, end
  and withdrawal, as in a slot. No deadline and no cut: every upload arrives unless its device
  withdraws it (goes offline); an upload that can never finish is refused. TDMA picks the next
  upload without a zero-delay SimPy event: when a completion or the slot boundary frees the band
  (every upload of the instant has joined), or, when an upload joins or leaves, through the
  caller's ``later`` (after the clock's device events of the instant). So no SimPy event of the
  uplink's is ever due at a slot boundary. At a checkpoint uploads are in flight:
  :meth:`~wflsim.sim.radio.shared.SharedUplink.state_dict` holds them and
  :meth:`~wflsim.sim.radio.shared.SharedUplink.load_state_dict` puts the pending
  completion back at its absolute time.

**The package.** :mod:`.base` (the protocol), :mod:`.modes` (the registry; building and
describing a run's uplink), :mod:`.spec` (the resolved ``[uplink]`` table), :mod:`.rates`
(Shannon's rate on a band or a share of it, an upload's time and energy, Proposition 1's minimum
power, the over-the-air window), :mod:`.sharing` (processor sharing), :mod:`.shared` (the shared
uplink's common part), one module per mode (:mod:`.dedicated`, :mod:`.ofdma`, :mod:`.tdma`,
:mod:`.aircomp`), :mod:`.interference` (inter-cell interference and the SINR) and :mod:`.cells`
(several cells: the table, the layout, the run's component, their uplink).
"""
