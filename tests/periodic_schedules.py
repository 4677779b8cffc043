"""Schedules for ``gq-worker --periodic tests.periodic_schedules:NAME`` in the tests."""

import gq

EVERY_SECOND = [gq.Periodic("tick", every=1)]
NOT_A_LIST = gq.Periodic("tick", every=1)
TWO_NAMED_ALIKE = [gq.Periodic("tick", every=1), gq.Periodic("tick", every=2)]
