"""The whole suite (tests/ and compat_tests/): child processes import the checkout under test.

The servers, CLIs and Spark workers the tests start run ``python -m pyrmq`` from temporary
directories, so they import pyrmq from wherever the venv's editable install points -- another
checkout when this one is a git worktree sharing the main one's venv, whose code would then be
tested instead. Putting this checkout first on PYTHONPATH makes them run the code under test
(containers are unaffected: they get only the variables a test changes).
"""

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(_ROOT), str(_ROOT / "spark"), *filter(None, [os.environ.get("PYTHONPATH")])])
