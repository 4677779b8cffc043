"""A task module that fails to import (gq-worker must exit 2 with the reason)."""

import gq

app = gq.App()
raise RuntimeError("the task module is broken on purpose")
