"""The learning side of wflsim: datasets and partitions, networks, and the federated learner.

* :mod:`wflsim.models.data` -- ``load_dataset`` (digits, MNIST, Fashion-MNIST, CIFAR-10) and
  ``partition`` (IID / Dirichlet label skew, pure numpy).
* :mod:`wflsim.models.nets` -- ``build_model`` / ``num_params`` for the paper's networks.
* :mod:`wflsim.models.submodels` -- FjORD sub-models: ``width_masks`` / ``flat_width_mask`` (which
  parameters a width keeps) and ``narrow_model`` (a sliced copy).
* :mod:`wflsim.models.learner` -- ``TorchLearner``: FedSGD with per-device parameter freezing, all
  participating devices' gradients in one ``torch.func.vmap`` call (implements
  :class:`wflsim.sim.learner.Learner`).

Only this package imports torch; the application builds the learner
(:func:`wflsim.app.run.make_learner`) and hands it to ``sim``'s engine.
"""
