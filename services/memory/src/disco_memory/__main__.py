"""``python -m disco_memory``: serve the memory service."""

from disco_memory.main import main

if __name__ == "__main__":
    main()
