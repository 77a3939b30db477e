"""Differential privacy on the radio (``[privacy]``, docs/privacy.md): clipping, Gaussian noise
where the scenario says (the server, each device, or the receiver's own noise over the air) and
the per-device accounting of the privacy spent, without torch.

* :mod:`.config` -- the scenario's ``[privacy]`` table;
* :mod:`.mechanism` -- the Gaussian mechanism's closed forms: the noise each device's update gets,
  as a noise multiplier, under every placement of the noise;
* :mod:`.compose` -- which update rules, strategies and clippings compose with each placement;
* :mod:`.accounting` -- each device's epsilon (RDP or PLD, on Google's dp-accounting);
* :mod:`.calibrate` -- the noise multiplier that meets a target epsilon over a run;
* :mod:`.ledger` -- the run's privacy ledger: every applied update composed, the budget;
* :mod:`.columns` -- the trace's ``[privacy]`` columns.
"""
