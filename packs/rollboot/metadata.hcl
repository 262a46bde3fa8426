app {
  url = "https://github.com/rollboot/rollboot"
}

pack {
  name        = "rollboot"
  description = "rollboot coordinator and agents as Nomad jobs: safe, automatic, rolling reboots of every client"
  version     = "0.1.0"
}
