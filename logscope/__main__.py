from .cli import run

if __name__ == "__main__":  # not when a worker process of --cluster local starts (spawn imports __main__)
    run()
