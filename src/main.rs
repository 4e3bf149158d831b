fn main() -> std::process::ExitCode {
    narrowgate::main()
}
