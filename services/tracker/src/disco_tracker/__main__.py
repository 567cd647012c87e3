"""``python -m disco_tracker``: serve the tracker service."""

from disco_tracker.main import main

if __name__ == "__main__":
    main()
