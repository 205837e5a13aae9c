"""The emulation's tests import the `emulation` package from mininet/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
