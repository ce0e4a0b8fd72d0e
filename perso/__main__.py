from perso.cli import main

raise SystemExit(main())
