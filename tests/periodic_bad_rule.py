"""A schedule module whose rule is bad: importing it raises gq.ConfigurationError."""

import gq

SCHEDULE = [gq.Periodic("nightly", cron="61 3 * * *")]
