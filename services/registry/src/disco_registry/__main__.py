"""``python -m disco_registry``: serve the registry service."""

from disco_registry.main import main

if __name__ == "__main__":
    main()
