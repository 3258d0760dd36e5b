from contrastext.cli import main

main()
