"""The shared vocabulary every component speaks: `Params` and the strict config base, the component
registries, capabilities. It imports nothing of perseval but `core/`, so any component may import it and it
imports none of them (tests/test_layering.py)."""
