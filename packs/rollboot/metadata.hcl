app {
  url = "https://github.com/rollboot/rollboot"
}

pack {
  name        = "rollboot"
  description = "rollboot agents as a Nomad system job: safe, automatic, rolling reboots of every client"
  version     = "0.1.0"
}
