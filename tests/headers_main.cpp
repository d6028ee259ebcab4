// Linked with one translation unit per public header: building this program
// is the test that each header compiles on its own.
int main() { return 0; }
