"""The benchmark suite: ``python -m benchmarks`` lists the benchmarks, ``python -m benchmarks NAME
[ARGS...]`` runs one (see ``benchmarks/README.md``)."""
