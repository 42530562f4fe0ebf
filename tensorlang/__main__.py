"""`python -m tensorlang ...`: the same as the `tensorlang` command."""

from tensorlang.cli import main

raise SystemExit(main())
