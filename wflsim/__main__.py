"""``python -m wflsim ...`` is the ``wflsim`` command."""

from wflsim.app.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
