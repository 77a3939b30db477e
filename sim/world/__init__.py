"""The world: physics (pure functions), mobility, the radio channel and the resolved system.

* :mod:`wflsim.sim.world.physics` -- path loss, payload, compute time and energy: vectorised, SI
  units in names (the uplink's rates are the radio's, :mod:`wflsim.sim.radio.rates`).
* :mod:`wflsim.sim.world.mobility` -- where every device is at a given time.
* :mod:`wflsim.sim.world.channel` -- path loss and fading: the channel the world applies and the one
  a scheme sees.
* :mod:`wflsim.sim.world.compute` -- compute jitter: each device's slowdown of local computation per
  slot.
* :mod:`wflsim.sim.world.availability` -- when devices are online.
* :mod:`wflsim.sim.world.system` -- the resolved per-device hardware and radio constants of a run.

How the uploads reach the server (the uplink modes, cells, interference) is the radio's:
:mod:`wflsim.sim.radio`.
"""
