"""``python -m disco_gateway``: serve the gateway service."""

from disco_gateway.main import main

if __name__ == "__main__":
    main()
