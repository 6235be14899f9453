/* gpuguard test: the definition libnextuser's RTLD_NEXT lookup must reach. */
int probe_value(void);

int probe_value(void)
{
	return 2;
}
