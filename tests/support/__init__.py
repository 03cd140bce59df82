"""What the tests share: capture loader, database builder, PostgreSQL server, golden outputs,
fakes of hardware interfaces."""
