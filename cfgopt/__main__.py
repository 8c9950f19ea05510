from cfgopt.cli import main

raise SystemExit(main())
