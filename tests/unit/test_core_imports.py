"""``import kip_lab`` needs pydantic alone: no Jupyter, Altair, graphviz, pandas or Spark."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CORE_MODULES = [
    "kip_lab",
    "kip_lab.assignors",
    "kip_lab.cluster",
    "kip_lab.coordinator",
    "kip_lab.coordinator.bootstrap",
    "kip_lab.machines",
    "kip_lab.protocol",
    "kip_lab.protocol.records",
    "kip_lab.regex",
    "kip_lab.runtime",
]

# A finder that refuses every module outside the standard library and pydantic's own
# dependencies, so the import below behaves as if nothing else were installed.
PROBE = textwrap.dedent(
    """
    import importlib, sys
    ALLOWED = {"pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection", "kip_lab"}
    class OnlyPydantic:
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in sys.stdlib_module_names or top in ALLOWED or top.startswith("_"):
                return None
            raise ImportError(f"{name} is not a core dependency")
    sys.meta_path.insert(0, OnlyPydantic())
    for module in MODULES:
        importlib.import_module(module)
    HEAVY = ("pandas", "altair", "graphviz", "ipywidgets", "pyspark", "re2", "yaml")
    heavy = sorted(m for m in HEAVY if m in sys.modules)
    print("loaded-heavy:", heavy)
    """
)


def test_core_imports_with_pydantic_alone():
    code = f"MODULES = {CORE_MODULES!r}\n" + PROBE
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "loaded-heavy: []"


def test_probe_rejects_a_non_core_import():
    """The probe itself can fail: importing a module it does not allow is an error."""
    code = "MODULES = ['kip_lab', 'yaml']\n" + PROBE
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert completed.returncode != 0
    assert "yaml is not a core dependency" in completed.stderr
