"""The former private home of :mod:`disco.auth`.

Kept only because ``disco_service`` (the services' kit) still imports
``DEV_AUTH_SECRET`` from here; everything else imports :mod:`disco.auth`.
Remove it once ``disco_service`` does too.
"""

from disco.auth import DEV_AUTH_ALGORITHM, DEV_AUTH_SECRET, mint_dev_token

__all__ = ["DEV_AUTH_ALGORITHM", "DEV_AUTH_SECRET", "mint_dev_token"]
