"""The Jupyter layer: step through a Lab run and change it. The core never imports this."""

from widgets.faults import Explorer, FaultPanel, explore
from widgets.stepper import Stepper

__all__ = ["Explorer", "FaultPanel", "Stepper", "explore"]
