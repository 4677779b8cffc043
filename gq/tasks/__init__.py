"""The task layer: functions as tasks on the byte layer (gq.App, gq.Task, results,
workflows, tenant groups, hooks, the test kit). Its public names are gq's own
(``gq.App``, ``gq.Result``, ``gq.chain``, ``gq.testing``); the modules here are internal."""
