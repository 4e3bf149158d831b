fn main() -> std::process::ExitCode {
    narrowgate::cli::main()
}
