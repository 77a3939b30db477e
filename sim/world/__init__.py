"""The world: physics (pure functions), mobility, the radio channel and the resolved system.

* :mod:`wflsim.sim.world.physics` -- rate, latency, energy, path loss: vectorised, SI units in
  names.
* :mod:`wflsim.sim.world.mobility` -- where every device is at a given time.
* :mod:`wflsim.sim.world.channel` -- path loss and fading: the channel the world applies and the one
  a scheme sees.
* :mod:`wflsim.sim.world.compute` -- compute jitter: each device's slowdown of local computation per
  slot.
* :mod:`wflsim.sim.world.system` -- the resolved per-device hardware and radio constants of a run.
* :mod:`wflsim.sim.world.uplink` -- how the uploads of a slot share the band (dedicated, OFDMA,
  TDMA): the ``[uplink]`` spec, re-exporting :mod:`wflsim.sim.world.sharing` (processor
  sharing), :mod:`wflsim.sim.world.shared_uplink` (the shared uplink's common part) and
  :mod:`wflsim.sim.world.uplink_disciplines` (OFDMA and TDMA).
"""
