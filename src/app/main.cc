#include "app/cli.h"

int main(int argc, char** argv) { return ef::RunCli(argc, argv); }
