"""``python -m wflsim.analysis.report RUN_OR_SWEEP_DIR OUT_DIR``: write the report of a run or a
sweep and print its page's path (:func:`wflsim.analysis.report.write.main`).
"""

import sys

from .write import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
