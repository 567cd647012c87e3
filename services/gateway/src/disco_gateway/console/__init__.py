"""The console: server-rendered pages (``/console``) where an operator reads the agents,
plans, tasks, sessions, topics and dead letters of a tenant, with the other services'
clients (:mod:`disco_gateway.console.clients`)."""
